package e2e

// End-to-end tests of secure execs (setuid, setgid, file capabilities):
// under sudo a traced process leaves the trace at such an exec, with
// everything it forks later, and the record says so; a real root login
// keeps tracing it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/marks"
	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
)

// privReader is a setuid-root copy of testdata/workloads/privread.c with
// the root-only files it reads.
type privReader struct {
	prog      string // setuid root, mode 4755
	file      string // root-only (0400), read by prog
	childFile string // root-only (0400), read by prog's forked child
	// secret is a word in both files' names and nowhere else: the record
	// must not hold it when the run was under sudo.
	secret string
}

// newPrivReader builds the setuid reader in a root-owned directory every
// user can reach, on a filesystem that honours setuid bits and whose
// page cache can be dropped; both files are evicted, so a traced read of
// them misses.
func newPrivReader(t *testing.T) privReader {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) to build the setuid reader")
	}
	dir, err := os.MkdirTemp("", "coldtrace-suid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Flags&unix.ST_NOSUID != 0 {
		t.Skipf("%s is mounted nosuid: no exec there is a secure one; set TMPDIR elsewhere", dir)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs: its pages cannot be evicted; set TMPDIR to a disk-backed directory", dir)
	}
	p := privReader{prog: filepath.Join(dir, "privread"), file: filepath.Join(dir, "hushhush-parent.bin"),
		childFile: filepath.Join(dir, "hushhush-child.bin"), secret: "hushhush"}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*13 + i>>9)
	}
	for _, f := range []string{p.file, p.childFile} {
		if err := os.WriteFile(f, data, 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, 0o400); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	src := filepath.Join("..", "..", "testdata", "workloads", "privread.c")
	out, err := exec.Command("cc", "-O2", "-o", p.prog, src,
		"-DPRIV_FILE=\""+p.file+"\"", "-DPRIV_CHILD_FILE=\""+p.childFile+"\"").CombinedOutput()
	if err != nil {
		t.Fatalf("cc privread: %v\n%s", err, out)
	}
	if err := os.Chmod(p.prog, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	unix.Sync()
	e2eutil.Evict(t, p.file)
	e2eutil.Evict(t, p.childFile)
	return p
}

// privRun is what one traced run of the reader left.
type privRun struct {
	parent, child int32
	rec           *record.Record
	json, text    string
}

// run traces `sh -c 'sleep; PROG; true'` with env (nil: a real root
// login) and reads back its record, JSON summary and text report.
func (p privReader) run(t *testing.T, out string, env []string) privRun {
	t.Helper()
	rec, js := filepath.Join(out, "s.rec"), filepath.Join(out, "s.json")
	r := runCT(t, ctOptions{env: env}, "-q", "-o", rec, "--json", js, "--", "sh", "-c", "sleep 0.2; "+p.prog+"; /bin/true")
	if r.code != 0 {
		t.Fatalf("exit %d; stdout %q; stderr %q", r.code, r.stdout, r.stderr)
	}
	var pr privRun
	var n, m int64
	if _, err := fmt.Sscanf(r.stdout, "parent %d child %d bytes %d %d", &pr.parent, &pr.child, &n, &m); err != nil || n != 1<<20 || m != 1<<20 {
		t.Fatalf("reader printed %q (%v), stderr %q: want both files read whole, 1 MiB each", r.stdout, err, r.stderr)
	}
	var err error
	if pr.rec, err = record.ReadFile(rec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	pr.json = string(b)
	rep := runCT(t, ctOptions{env: env}, "report", rec)
	if rep.code != 0 {
		t.Fatalf("report: exit %d: %s", rep.code, rep.stderr)
	}
	pr.text = rep.stdout
	return pr
}

func (pr privRun) process(pid int32) *record.Process {
	for i := range pr.rec.Processes {
		if pr.rec.Processes[i].PID == pid {
			return &pr.rec.Processes[i]
		}
	}
	return nil
}

func filesNamed(r *record.Record, word string) []string {
	var names []string
	for _, f := range r.Files {
		if strings.Contains(f.Path, word) || strings.Contains(f.HostPath, word) {
			names = append(names, f.Name())
		}
	}
	return names
}

// Under sudo, a setuid-root program leaves the trace at its exec: the
// root-only files it and its forked child read appear nowhere (record,
// JSON, text), the child is not a process of the record, the record and
// both reports say "not traced: PROG (setuid), pid P, from +T", and the
// shell's later child is traced as before.
func TestSecureExecLeavesTraceUnderSudo(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	p := newPrivReader(t)
	pr := p.run(t, userDir(t, u), sudoEnv(u))

	if got := filesNamed(pr.rec, p.secret); len(got) != 0 {
		t.Errorf("the record holds root-only files read by the setuid program: %q", got)
	}
	for what, s := range map[string]string{"JSON summary": pr.json, "text report": pr.text} {
		if strings.Contains(s, p.secret) {
			t.Errorf("the %s names a root-only file: %q", what, s)
		}
	}
	if len(pr.rec.Untraced) != 1 {
		t.Fatalf("record lists %d untraced processes, want 1: %+v", len(pr.rec.Untraced), pr.rec.Untraced)
	}
	un := pr.rec.Untraced[0]
	if un.Path != p.prog || un.PID != pr.parent || un.Reason != record.UntracedSetuid || un.AtNS <= 0 || un.AtNS > pr.rec.WallNS {
		t.Errorf("untraced entry %+v; want %s, pid %d, setuid, within the run's %d ns", un, p.prog, pr.parent, pr.rec.WallNS)
	}
	line := fmt.Sprintf("not traced: %s (setuid), pid %d, from +", p.prog, pr.parent)
	if strings.Count(pr.text, line) != 1 {
		t.Errorf("text report lacks %q once:\n%s", line, pr.text)
	}
	var sum struct {
		Untraced []record.Untraced `json:"untraced"`
	}
	if err := json.Unmarshal([]byte(pr.json), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Untraced) != 1 || sum.Untraced[0] != un {
		t.Errorf("JSON summary untraced = %+v, want [%+v]", sum.Untraced, un)
	}
	if c := pr.process(pr.child); c != nil {
		t.Errorf("the setuid program's forked child %d is a process of the record: %+v", pr.child, *c)
	}
	for _, th := range pr.rec.Threads {
		if th.PID == pr.child {
			t.Errorf("a thread of the forked child %d is in the record: %+v", pr.child, th)
		}
	}
	if p := pr.process(pr.parent); p == nil || p.Exited || p.EndNS != un.AtNS {
		t.Errorf("the program's process %d: %+v; want it tracked until its exec at %d ns, not exited", pr.parent, p, un.AtNS)
	}
	if err := invariants.Err(pr.rec); err != nil {
		t.Errorf("invariants: %v", err)
	}
	if n := countComm(pr.rec, "true"); n != 1 {
		t.Errorf("%d processes named true after the setuid program, want 1: the shell stays traced", n)
	}
}

func countComm(r *record.Record, comm string) int {
	n := 0
	for _, p := range r.Processes {
		if p.Comm == comm {
			n++
		}
	}
	return n
}

// A real root login may read whatever a setuid program reads: the same
// program stays traced, both root-only files show with their misses, its
// forked child is a process of the record, and nothing is listed as not
// traced.
func TestSecureExecStaysTracedForRealRoot(t *testing.T) {
	requireTracing(t)
	p := newPrivReader(t)
	out := t.TempDir()
	pr := p.run(t, out, nil)

	if len(pr.rec.Untraced) != 0 || strings.Contains(pr.text, "not traced:") || strings.Contains(pr.json, `"untraced"`) {
		t.Errorf("a real root login's run lists untraced processes: %+v", pr.rec.Untraced)
	}
	for _, f := range []string{p.file, p.childFile} {
		var found *record.File
		for i := range pr.rec.Files {
			if pr.rec.Files[i].Path == f {
				found = &pr.rec.Files[i]
			}
		}
		if found == nil {
			t.Errorf("%s is not among the record's %d files", f, len(pr.rec.Files))
			continue
		}
		if found.PagesMissed == 0 || found.PagesAccessed == 0 {
			t.Errorf("%s: %d pages accessed, %d missed; want both above 0 (evicted before the run)", f, found.PagesAccessed, found.PagesMissed)
		}
		if !strings.Contains(pr.json, strconv.Quote(f)) {
			t.Errorf("the JSON summary does not name %s", f)
		}
	}
	if pr.process(pr.child) == nil {
		t.Errorf("the setuid program's forked child %d is not a process of the record", pr.child)
	}
}

// `sudo -n -l` reads /etc/sudoers (0440 root) as root: run under sudo,
// that read stays out of the record and sudo is listed as not traced.
func TestSudoListStaysUntracedUnderSudo(t *testing.T) {
	requireTracing(t)
	sudo, err := exec.LookPath("sudo")
	if err != nil {
		t.Skip("sudo is not installed: the setuid reader tests cover secure execs without it")
	}
	if _, err := os.Stat("/etc/sudoers"); err != nil {
		t.Skipf("no /etc/sudoers: %v", err)
	}
	u := testuser.Create(t)
	out := userDir(t, u)
	rec := filepath.Join(out, "s.rec")
	r := runCT(t, ctOptions{env: sudoEnv(u)}, "-q", "-o", rec, "--", "sh", "-c", "sleep 0.2; sudo -n -l; true")
	if r.code != 0 {
		t.Fatalf("exit %d (the command ends with true): %s", r.code, r.stderr)
	}
	rc, err := record.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := filesNamed(rc, "sudoers"); len(got) != 0 {
		t.Errorf("the record holds sudo's configuration files: %q", got)
	}
	n := 0
	for _, un := range rc.Untraced {
		if un.Reason == record.UntracedSetuid && (un.Path == sudo || filepath.Base(un.Path) == "sudo") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("record lists sudo as not traced %d times, want 1: %+v", n, rc.Untraced)
	}
}

// Under sudo, `attach` to the user's process follows it up to its exec
// of a setuid program and no further: the record lists the exec as not
// traced, holds none of the root-only files, and the attach ends once
// nothing it traces is left.
func TestAttachStopsAtSecureExecUnderSudo(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	p := newPrivReader(t)
	out := userDir(t, u)
	target := exec.Command("sh", "-c", "read go; exec "+p.prog)
	target.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
	gate, err := target.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	target.Stdout = &stdout
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Process.Kill(); _ = target.Wait() })
	rec := filepath.Join(out, "a.rec")
	a := startAttachAs(t, u, "-q", "-o", rec, "--pid", strconv.Itoa(target.Process.Pid))
	if _, err := gate.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := target.Wait(); err != nil {
		t.Fatalf("the setuid program: %v; stdout %q", err, stdout.String())
	}
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("attach: %v; stderr:\n%s", err, a.stderr.String())
	}
	var parent, child int32
	if _, err := fmt.Sscanf(stdout.String(), "parent %d child %d", &parent, &child); err != nil || int(parent) != target.Process.Pid {
		t.Fatalf("reader printed %q (%v), want the attached pid %d", stdout.String(), err, target.Process.Pid)
	}
	r, err := record.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := filesNamed(r, p.secret); len(got) != 0 {
		t.Errorf("the attach record holds root-only files read by the setuid program: %q", got)
	}
	if len(r.Untraced) != 1 || r.Untraced[0].PID != parent || r.Untraced[0].Path != p.prog || r.Untraced[0].Reason != record.UntracedSetuid {
		t.Errorf("untraced = %+v, want [%s, pid %d, setuid]", r.Untraced, p.prog, parent)
	}
	for _, pr := range r.Processes {
		if pr.PID == child {
			t.Errorf("the setuid program's forked child %d is a process of the attach record", child)
		}
	}
}

// startAttachAs starts `coldtrace attach ARGS` under sudo for u and
// returns once it has attached (its process list is written).
func startAttachAs(t *testing.T, u testuser.User, args ...string) *attachRun {
	t.Helper()
	a := &attachRun{cmd: exec.Command(ctBin, append([]string{"attach"}, args...)...)}
	a.cmd.Env = u.SudoEnviron(os.Environ())
	a.cmd.Stderr = &a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.cmd.Process.Kill() })
	pids := filepath.Join(marks.Dir, strconv.Itoa(a.cmd.Process.Pid)+".pids")
	deadline := time.Now().Add(30 * time.Second)
	for _, err := os.Stat(pids); err != nil; _, err = os.Stat(pids) {
		if time.Now().After(deadline) {
			t.Fatalf("attach did not start; stderr:\n%s", a.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a
}
