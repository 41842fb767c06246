package e2e

// End-to-end tests of what a hostile record, a directory of planted file
// names, a zombie's comm and root-only paths can make coldtrace print or
// tell, run as root with SUDO_UID/SUDO_GID/SUDO_USER of a user the test
// creates (internal/testuser), as a sudoers grant of coldtrace would.

import (
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
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
	"github.com/coldtrace/coldtrace/report/status"
)

// hostileNames are file names another user can plant: escape sequences,
// a newline that would fake a line, invalid UTF-8, a C1 CSI, a bell, a
// carriage return, a tab, a bidi override, shell syntax and a 255-byte
// name.
var hostileNames = []string{
	"esc\x1b[2J\x1b[31mred", "nl\nFAKE LINE", "bad\xff\xfe", "c1\u009b31m", "bell\x07", "cr\rover",
	"tab\tname", "bidi\u202etxt.exe", "quote'$(id)", "with space", strings.Repeat("n", 251) + ".bin",
}

// terminalSafe fails t when out holds anything a terminal would act on:
// a control character other than the newline and tab of the layout, a C1
// control, a format character (bidi), or invalid UTF-8.
func terminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s is not valid UTF-8: %q", what, out)
		return
	}
	bad := 0
	for _, r := range out {
		if r != '\n' && r != '\t' && !unicode.IsPrint(r) {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s has %d raw control or format characters:\n%q", what, bad, out)
	}
}

// plantHostileDir makes a directory of u holding a 64 KiB file under each
// hostile name.
func plantHostileDir(t *testing.T, u testuser.User) (string, []string) {
	t.Helper()
	dir := filepath.Join(userDir(t, u), "planted")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, n := range hostileNames {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, make([]byte, 64<<10), 0o644); err != nil {
			t.Fatalf("plant %q: %v", n, err)
		}
		if err := os.Chown(p, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return dir, paths
}

// hostileRecord writes, in dir, a recorded run (the truth-cold fixture)
// whose files, caches and host name are the given hostile values.
func hostileRecord(t *testing.T, dir, host string, files []string, caches []record.Cache) string {
	t.Helper()
	rec := fixtures.Record(t, "truth-cold")
	id := 0
	for _, f := range rec.Files {
		id = max(id, f.ID)
	}
	for i, p := range files {
		rec.Files = append(rec.Files, record.File{ID: id + 1 + i, Dev: 8<<20 | 1, Ino: uint64(900000 + i), Path: p,
			SizeBytes: 64 << 10, PagesAccessed: 16, PagesMissed: 16, BytesFromDisk: 64 << 10})
	}
	if host != "" {
		rec.Host.Hostname = host
	}
	if rec.JIT == nil {
		rec.JIT = &record.JIT{}
	}
	rec.JIT.Caches = append(rec.JIT.Caches, caches...)
	path := filepath.Join(dir, "hostile.ctrace")
	if err := record.WriteFile(path, rec); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sourceExports sources script in dir with sh, as `. FILE` and as eval,
// and checks each variable of good is exported byte for byte.
func sourceExports(t *testing.T, dir, script string, good map[string]string) {
	t.Helper()
	path := filepath.Join(dir, "persist.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for v, want := range good {
		for _, how := range []string{`. "$1"`, `eval "$(cat "$1")"`} {
			sh := exec.Command("sh", "-c", how+` && printf '%s' "$`+v+`"`, "sh", path)
			sh.Dir, sh.Env = dir, []string{"HOME=/home/reader", "PATH=/usr/bin:/bin"}
			out, err := sh.Output()
			if err != nil {
				t.Fatalf("sh -c %s: %v", how, err)
			}
			if string(out) != want {
				t.Errorf("%s exported %s=%q, want %q", how, v, out, want)
			}
		}
	}
}

// A record's cache names and variables reach `report --persist` output,
// which users eval: sourced, it must run nothing, export the good values
// byte for byte, and leave out the rest with a comment.
func TestPersistOutputSourcesNoCodeFromTheRecord(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	dir := userDir(t, u)
	pwned, pwned2 := filepath.Join(dir, "pwned"), filepath.Join(dir, "pwned2")
	cache := func(name, root, movedBy, survival string) record.Cache {
		return record.Cache{Name: name, Framework: name, Root: root, Via: movedBy, MovedBy: movedBy, Lookups: 1, Misses: 1,
			EntriesWritten: 1, BytesWritten: 10, SizeBytes: 10, CompileNS: 2e9, FS: "ext4", Survival: survival}
	}
	// A cache that does not survive is moved under the reader's cache
	// home by its name, which holds no slash: its code writes "pwned3"
	// in the shell's directory, dir.
	movedName := "b`id>pwned3`'x$(id>pwned3)"
	// The variable of each line is the registry's (worked back from the
	// root), so the record's moved-by text never reaches the shell; the
	// values are the record's and must come back byte for byte.
	good := map[string]string{ // variable → the value sh must export
		"TRITON_CACHE_DIR":        "/c/it's $(id>" + pwned + ")",
		"TORCHINDUCTOR_CACHE_DIR": `/c/a\b` + "`id>" + pwned + "`",
		"CUPY_CACHE_DIR":          "/c/$HOME/${PATH}",
		"NUMBA_CACHE_DIR":         "/home/reader/.cache/" + movedName,
	}
	caches := []record.Cache{
		cache("triton", good["TRITON_CACHE_DIR"], "A=1; id>"+pwned2+"; B", "persistent"),
		cache("inductor", good["TORCHINDUCTOR_CACHE_DIR"], "TORCHINDUCTOR_CACHE_DIR", "persistent"),
		cache("cupy", good["CUPY_CACHE_DIR"], "1BAD", "persistent"),
		cache("numba", "/dev/shm/y", "NUMBA_CACHE_DIR", "lost at reboot"),
		cache("cuda", "/c/a\nid>"+pwned, "CUDA_CACHE_PATH", "persistent"),
		cache("jax", "/c/\x1b]0;title\x07", "JAX_COMPILATION_CACHE_DIR", "persistent"),
		cache("mesa", "/c/\u009b2J", "MESA_SHADER_CACHE_DIR", "persistent"),
		cache("deepgemm", "/c/e\u202etxt", "BAD\x1b[31m", "persistent"),
		cache("vllm", "/c/v\xff", "VLLM_CACHE_ROOT", "persistent"),
	}
	caches[3].Name = movedName // a hostile name of a cache that moves
	caches[3].Framework = "Numba"
	rec := hostileRecord(t, dir, "", nil, caches)
	r := runCT(t, ctOptions{env: sudoEnv(u)}, "report", "--persist", rec)
	if r.code != 0 {
		t.Fatalf("report --persist: exit %d: %s", r.code, r.stderr)
	}
	terminalSafe(t, "report --persist", r.stdout)
	if n := strings.Count(r.stdout, "\n# skipped: "); n != 5 {
		t.Errorf("%d '# skipped:' comments, want 5 (newline, ESC, C1, bidi override, invalid UTF-8):\n%s", n, r.stdout)
	}
	if strings.Contains(r.stdout, "1BAD") || strings.Contains(r.stdout, "A=1") {
		t.Errorf("a moved-by text of the record reached the shell:\n%s", r.stdout)
	}
	if n := strings.Count(r.stdout, "\nexport "); n != len(good) {
		t.Errorf("%d export lines, want %d:\n%s", n, len(good), r.stdout)
	}
	sourceExports(t, dir, r.stdout, good)
	for _, p := range []string{pwned, pwned2, filepath.Join(dir, "pwned3")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("sourcing report --persist ran the record's code: %s exists", p)
		}
	}
	// The report's persist table escapes its roots too.
	r = runCT(t, ctOptions{env: sudoEnv(u)}, "report", rec)
	terminalSafe(t, "report", r.stdout+r.stderr)
	if !strings.Contains(r.stdout+r.stderr, `/c/\x1b]0;title\x07`) {
		t.Errorf("the escaped root is not in the report:\n%s", r.stdout)
	}
}

// Planted file names reach every subcommand that walks a directory or
// reads a record; none of them may put a control character on the
// terminal, and each file is still listed once.
func TestHostileNamesNeverReachTheTerminal(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	env := sudoEnv(u)
	dir, paths := plantHostileDir(t, u)
	n := len(hostileNames)
	check := func(what string, r ctRun, wantCode int) string {
		t.Helper()
		if r.code != wantCode {
			t.Errorf("%s: exit %d, want %d; stderr %q", what, r.code, wantCode, r.stderr)
		}
		terminalSafe(t, what+" (stdout)", r.stdout)
		terminalSafe(t, what+" (stderr)", r.stderr)
		return r.stdout + r.stderr
	}
	out := check("status DIR", runCT(t, ctOptions{env: env}, "status", "--top", "100", dir), 0)
	if !strings.Contains(out, fmt.Sprintf("coldtrace status: %d files", n)) || !strings.Contains(out, `esc\x1b[2J\x1b[31mred`) ||
		!strings.Contains(out, `nl\nFAKE LINE`) || !strings.Contains(out, `bad\xff\xfe`) || strings.Contains(out, "\nFAKE LINE") {
		t.Errorf("status does not list the %d planted files escaped:\n%s", n, out)
	}
	out = check("prefetch --dry-run DIR", runCT(t, ctOptions{env: env}, "prefetch", "--dry-run", dir), 0)
	if c := strings.Count(out, dir+"/"); c != n {
		t.Errorf("prefetch --dry-run lists %d paths, want %d:\n%s", c, n, out)
	}
	out = check("evict DIR", runCT(t, ctOptions{env: env}, "evict", dir), 0)
	if !strings.Contains(out, fmt.Sprintf("coldtrace evict: %d files", n)) {
		t.Errorf("evict: %s", out)
	}

	// A record naming the planted files, a file that is gone, a cache
	// root with an escape, and a host name with a terminal title.
	gone := filepath.Join(dir, "gone\x1b[31m")
	caches := []record.Cache{{Name: "evil\x1b[1m", Framework: "Numba", Root: filepath.Join(dir, "cache\x1b[5m\nx"), Via: "NUMBA_CACHE_DIR",
		MovedBy: "NUMBA\x1b[1m", EntriesWritten: 1, CompileNS: 1e9, FS: "tmpfs\x1b[2J", Survival: "lost at reboot\x07"}}
	rec := hostileRecord(t, userDir(t, u), "evil\x1b]0;pwned\x07host", append(append([]string(nil), paths...), gone), caches)
	// The record keeps the invalid UTF-8 name byte-exact (path_b64), so
	// it is found; the gone file and the fixture's own file are not.
	out = check("status --from", runCT(t, ctOptions{env: env}, "status", "--top", "100", "--from", rec), exitPartial)
	if !strings.Contains(out, fmt.Sprintf("coldtrace status: %d files", n)) || strings.Count(out, ": no such file or directory") != 2 || !strings.Contains(out, `gone\x1b[31m`) ||
		!strings.Contains(out, `evil\x1b]0;pwned\x07host`) || !strings.Contains(out, `evil\x1b[1m`) {
		t.Errorf("status --from: files, the gone file, the host or the cache are not there escaped:\n%s", out)
	}
	out = check("prefetch --dry-run --from", runCT(t, ctOptions{env: env}, "prefetch", "--dry-run", "--from", rec), exitPartial)
	if c := strings.Count(out, dir+"/"); c != n+1 { // the planted files found and the gone one
		t.Errorf("prefetch --dry-run --from names %d paths, want %d:\n%s", c, n+1, out)
	}
	check("evict --from", runCT(t, ctOptions{env: env}, "evict", "--from", rec), exitPartial)
	check("prefetch --from", runCT(t, ctOptions{env: env}, "prefetch", "--from", rec), exitPartial)
	check("report", runCT(t, ctOptions{env: env}, "report", "--top", "100", rec), 0)
	check("report --persist", runCT(t, ctOptions{env: env}, "report", "--persist", rec), 0)
	check("report --segments", runCT(t, ctOptions{env: env}, "report", "--segments", rec), 0)
	check("diff", runCT(t, ctOptions{env: env}, "diff", "--top", "100", fixtures.Path("truth-cold"), rec), 0)
	check("merge", runCT(t, ctOptions{env: env}, "merge", rec, rec), 0)
}

// A zombie's comm is the name its program gave itself: attach --pid of a
// zombie says it exited, naming the comm escaped.
func TestAttachZombieCommIsEscaped(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	// The child renames itself and exits once its parent is sleep (after
	// the exec), which never reaps it; the shell before the exec might.
	gate, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command("sh", "-c", `sh -c 'read x <&3; printf "\033[2JZ\nq" > /proc/self/comm' & echo $!; exec sleep 60`)
	parent.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
	parent.ExtraFiles = []*os.File{gate}
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	gate.Close()
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	var line [32]byte
	k, _ := stdout.Read(line[:])
	pid, err := strconv.Atoi(strings.TrimSpace(string(line[:k])))
	if err != nil {
		t.Fatalf("child pid %q: %v", line[:k], err)
	}
	waitFor := func(path, want string) string {
		var got string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			b, _ := os.ReadFile(path)
			if got = string(b); strings.Contains(got, want) {
				break
			}
		}
		return got
	}
	if comm := waitFor(fmt.Sprintf("/proc/%d/comm", parent.Process.Pid), "sleep"); comm != "sleep\n" {
		t.Fatalf("the parent is %q, not sleep", comm)
	}
	if _, err := release.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	release.Close()
	if stat := waitFor(fmt.Sprintf("/proc/%d/stat", pid), ") Z "); !strings.Contains(stat, "\x1b[2JZ\nq) Z ") {
		t.Fatalf("no zombie with the planted comm: %q", stat)
	}
	r := runCT(t, ctOptions{env: sudoEnv(u)}, "attach", "--pid", strconv.Itoa(pid))
	if r.code == 0 || !strings.Contains(r.stderr, `\x1b[2JZ\nq`) || !strings.Contains(r.stderr, "exited") {
		t.Errorf("attach --pid of a zombie: exit %d, stderr %q; want its exit told, the comm escaped", r.code, r.stderr)
	}
	terminalSafe(t, "attach --pid of a zombie", r.stderr)
}

// rootOnlyDir is a 0700 directory of root's in a world-searchable place,
// holding a directory "exists".
func rootOnlyDir(t *testing.T) string {
	t.Helper()
	priv, err := os.MkdirTemp("", "coldtrace-rootonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(priv) })
	if err := os.Mkdir(filepath.Join(priv, "exists"), 0o755); err != nil {
		t.Fatal(err)
	}
	return priv
}

// alike replaces the differing last element so two answers compare.
func alike(s, elem string) string { return strings.ReplaceAll(s, elem, "ELEM") }

// Under sudo, a path the user cannot reach gives one answer whether or
// not it exists: attach --cgroup, doctor --dir and the caches status
// lists. Root's own answers differ, which is what the user must not learn.
func TestUnreachablePathsFailAlike(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	env := sudoEnv(u)
	priv := rootOnlyDir(t)
	exists, absent := filepath.Join(priv, "exists"), filepath.Join(priv, "absent")

	rootE := runCT(t, ctOptions{}, "attach", "--cgroup", exists)
	rootA := runCT(t, ctOptions{}, "attach", "--cgroup", absent)
	if alike(rootE.stderr, "exists") == alike(rootA.stderr, "absent") {
		t.Fatalf("as root the two paths answer alike (%q): the check below could not fail", rootE.stderr)
	}
	sudoE := runCT(t, ctOptions{env: env}, "attach", "--cgroup", exists)
	sudoA := runCT(t, ctOptions{env: env}, "attach", "--cgroup", absent)
	if sudoE.code == 0 || sudoE.code != sudoA.code || alike(sudoE.stderr, "exists") != alike(sudoA.stderr, "absent") ||
		!strings.Contains(sudoE.stderr, "permission denied") {
		t.Errorf("attach --cgroup under sudo: exit %d %q vs exit %d %q; want one permission-denied answer",
			sudoE.code, sudoE.stderr, sudoA.code, sudoA.stderr)
	}

	statusCachesFailAlike(t, u, exists, absent)
}

// statusCachesFailAlike: a cache root behind a 0700 directory is "not
// readable", existing or not; a missing root the user can see is
// "missing".
func statusCachesFailAlike(t *testing.T, u testuser.User, exists, absent string) {
	t.Helper()
	env := sudoEnv(u)
	if err := os.MkdirAll(filepath.Join(exists, "triton", "KEY"), 0o755); err != nil {
		t.Fatal(err)
	}
	visible := filepath.Join(userDir(t, u), "triton")
	texts := map[string]string{}
	for _, root := range []string{filepath.Join(exists, "triton"), filepath.Join(absent, "triton"), visible} {
		r := runCT(t, ctOptions{env: append(env, "TRITON_CACHE_DIR="+root)}, "status", "--json")
		var rep status.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("status --json: %v: %s %s", err, r.stdout, r.stderr)
		}
		found := false
		for _, c := range rep.Caches {
			if c.Root != root {
				continue
			}
			found = true
			unreachable := root != visible
			if c.NotReadable != unreachable || c.Exists || c.Files != 0 || (!unreachable && (c.FS == nil || !c.FS.Missing)) {
				t.Errorf("status --json, cache at %s: %+v (fs %+v)", root, c, c.FS)
			}
		}
		if !found {
			t.Errorf("status --json lists no cache at %s", root)
		}
		r = runCT(t, ctOptions{env: append(env, "TRITON_CACHE_DIR="+root)}, "status")
		texts[root] = r.stdout
	}
	e, a := texts[filepath.Join(exists, "triton")], texts[filepath.Join(absent, "triton")]
	if alike(e, "exists") != alike(a, "absent") {
		t.Errorf("status under sudo, root-only cache roots answer differently:\n%s\nvs\n%s", e, a)
	}
	if f := factsOf(e, filepath.Join(exists, "triton")); !strings.HasPrefix(f, "not readable by this user") || strings.Contains(f, "missing") {
		t.Errorf("status: an existing root-only cache root reads %q; want not readable", f)
	}
	if f := factsOf(texts[visible], visible); !strings.HasPrefix(f, "missing; would be on") {
		t.Errorf("status: a missing root the user can see reads %q; want missing", f)
	}
}

// factsOf is the facts line under the status row of the cache at root.
func factsOf(status, root string) string {
	lines := strings.Split(status, "\n")
	for i, l := range lines {
		if strings.Contains(l, " "+root+" (via ") && i+1 < len(lines) {
			return strings.TrimSpace(lines[i+1])
		}
	}
	return ""
}

// doctor --dir looks the directory up as the user: a root-only path
// fails alike whether or not it exists.
func TestDoctorDirUnreachableFailsAlike(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	priv := rootOnlyDir(t)
	pageCacheLine := func(r ctRun) string {
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.Contains(l, "page-cache counts") {
				return l
			}
		}
		return ""
	}
	e := runCT(t, ctOptions{env: sudoEnv(u), timeout: 120 * time.Second}, "doctor", "--dir", filepath.Join(priv, "exists"))
	a := runCT(t, ctOptions{env: sudoEnv(u), timeout: 120 * time.Second}, "doctor", "--dir", filepath.Join(priv, "absent"))
	le, la := pageCacheLine(e), pageCacheLine(a)
	if le == "" || alike(le, "exists") != alike(la, "absent") || !strings.Contains(le, "permission denied") {
		t.Errorf("doctor --dir under sudo: %q vs %q; want one permission-denied answer", le, la)
	}
	terminalSafe(t, "doctor", e.stdout+e.stderr)
}

// Render commands check -o before they read anything, and -o "" is an
// error, never stdout; a FIFO as the command is named as one.
func TestOutputChecksComeFirst(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	env := sudoEnv(u)
	rec := fixtures.Path("truth-cold")
	r := runCT(t, ctOptions{env: env}, "diff", "--segments", "1,2", "-o", "/nonexistent-dir/d.txt", "/nonexistent-record.ctrace")
	if r.code != exitUsage || !strings.Contains(r.stderr, "-o /nonexistent-dir/d.txt") || strings.Contains(r.stderr, "nonexistent-record") {
		t.Errorf("diff --segments with a bad -o and a bad record: exit %d, stderr %q; want the -o refused first", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"diff", "--segments", "1,2", "-o", "", rec},
		{"diff", "-o", "", rec, rec},
		{"merge", "-o", "", rec},
		{"report", "-o", "", rec},
		{"report", "--persist", "-o", "", rec},
		{"report", "--segments", "-o", "", rec},
		{"attach", "--pid", strconv.Itoa(os.Getpid()), "-o", ""},
		{"attach", "--pid", strconv.Itoa(os.Getpid()), "--json", ""},
		{"bench", "--a", "true", "--b", "true", "--json", ""},
	} {
		r := runCT(t, ctOptions{env: env}, args...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "empty path") {
			t.Errorf("%q: exit %d, stdout %d bytes, stderr %q; want an empty-path refusal", args, r.code, len(r.stdout), r.stderr)
		}
	}

	fifo := filepath.Join(userDir(t, u), "fifo\x1b[31m")
	if err := unix.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	{
		requireTracing(t) // the rest runs a command
		r = runCT(t, ctOptions{env: env, timeout: 30 * time.Second}, "-q", "--", fifo)
		escaped := strings.ReplaceAll(fifo, "\x1b", `\x1b`)
		if r.code != 127 || !strings.Contains(r.stderr, escaped+" is a FIFO, not an executable") {
			t.Errorf("FIFO as the command: exit %d, stderr %q; want 127 and the FIFO named", r.code, r.stderr)
		}
		terminalSafe(t, "FIFO as the command", r.stderr)
	}
}

// A run's record says a cache root behind a directory the user cannot
// search is unreadable, not missing, whether or not it exists.
func TestRecordCacheBehindRootOnlyDirIsUnreadable(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	priv := rootOnlyDir(t)
	if err := os.MkdirAll(filepath.Join(priv, "exists", "k", "entry"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := userDir(t, u)
	for _, root := range []string{filepath.Join(priv, "exists", "k"), filepath.Join(priv, "absent", "k")} {
		recPath := filepath.Join(out, "r.ctrace")
		r := runCT(t, ctOptions{env: sudoEnv(u)}, "-q", "--cache-dir", "k="+root, "-o", recPath, "--", "true")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		rec, err := record.ReadFile(recPath)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range rec.JIT.Caches {
			if c.Root == root {
				found = true
				if !c.Unreadable || c.Missing || c.Files != 0 || c.FS != "" {
					t.Errorf("record, cache at %s: unreadable %v, missing %v, %d files, fs %q; want unreadable alone",
						root, c.Unreadable, c.Missing, c.Files, c.FS)
				}
			}
		}
		if !found {
			t.Errorf("the record lists no cache at %s", root)
		}
		r = runCT(t, ctOptions{env: sudoEnv(u)}, "report", recPath)
		if strings.Contains(r.stdout+r.stderr, "directory missing") {
			t.Errorf("report calls the root-only cache root %s missing:\n%s", root, r.stdout)
		}
	}
}
