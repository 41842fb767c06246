package e2e

// End-to-end tests of running coldtrace as root safely: which files an
// output may replace and with whose rights, sudo granting only the user's
// rights, argv and environment passed byte for byte, signals reaching the
// whole command and never costing the outputs, and traced strings escaped
// before they reach the terminal. The sudo cases run coldtrace (the test
// binary, as root) with SUDO_UID/SUDO_GID/SUDO_USER set as sudo sets them,
// for a user the test creates (internal/testuser).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// ctRun is one run of coldtrace as a subprocess.
type ctRun struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// ctOptions shape a run: extra environment, descriptors from 3 on, a
// umask (through sh), and a time limit after which the run is killed.
type ctOptions struct {
	env     []string
	extra   []*os.File
	umask   string
	timeout time.Duration
}

func runCT(t *testing.T, o ctOptions, args ...string) ctRun {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var cmd *exec.Cmd
	if o.umask != "" {
		cmd = exec.CommandContext(ctx, "sh", append([]string{"-c", "umask " + o.umask + `; exec "$0" "$@"`, ctBin}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, ctBin, args...)
	}
	cmd.Env = append(os.Environ(), o.env...)
	cmd.ExtraFiles = o.extra
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := ctRun{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("coldtrace %q still ran after %v; stderr: %s", args, o.timeout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run coldtrace: %v", err)
	}
	return r
}

// sudoEnv is the environment sudo gives coldtrace when u runs it.
func sudoEnv(u testuser.User) []string {
	return []string{"SUDO_UID=" + strconv.Itoa(u.UID), "SUDO_GID=" + strconv.Itoa(u.GID), "SUDO_USER=" + u.Name, "HOME=/root"}
}

// userDir is a directory owned by u (mode 0755) in a world-searchable
// place, removed at the end of t.
func userDir(t *testing.T, u testuser.User) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "coldtrace-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	return dir
}

func fileType(t *testing.T, path string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("lstat %s: %v", path, err)
	}
	return st.Mode & unix.S_IFMT
}

func noRawEscape(t *testing.T, what, s string) {
	t.Helper()
	if strings.ContainsRune(s, 0x1b) {
		t.Errorf("%s has a raw escape character: %q", what, s)
	}
}

// Every output flag (--json, -o, --pprof, --timeline; report -o, diff -o)
// refuses a device node, a FIFO or a symlink in one line, leaves it as it
// was, and runs nothing.
func TestOutputsOnlyReplaceRegularFiles(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "f")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Fatal(err)
	}
	rec := fixtures.Path("truth-cold")
	marker := filepath.Join(dir, "ran")
	for _, c := range []struct {
		path string
		kind uint32
	}{{"/dev/null", unix.S_IFCHR}, {"/dev/stdout", unix.S_IFLNK}, {fifo, unix.S_IFIFO}, {link, unix.S_IFLNK}} {
		for _, args := range [][]string{
			{"-q", "--json", c.path, "--", "touch", marker},
			{"-q", "-o", c.path, "--", "touch", marker},
			{"-q", "--pprof", c.path, "--", "touch", marker},
			{"-q", "--timeline", c.path, "--", "touch", marker},
			{"report", "-o", c.path, rec},
			{"diff", "-o", c.path, rec, rec},
		} {
			r := runCT(t, ctOptions{timeout: 20 * time.Second}, args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "replaces only regular files") ||
				strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("%q: exit %d, stderr %q; want %d and one line", args, r.code, r.stderr, exitUsage)
			}
			if got := fileType(t, c.path); got != c.kind {
				t.Errorf("%q: %s changed type to %o", args, c.path, got)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("%q: the command ran although its output was refused", args)
			}
		}
	}
}

// Under sudo coldtrace grants only the invoking user's rights: the command
// runs as the user; --user root, --json under /etc and a root-only cache
// tree (--cache-dir, HF_HUB_CACHE) are refused or left unread.
func TestSudoGrantsOnlyTheUsersRights(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	env := sudoEnv(u)

	// The command runs as the user, with their groups and HOME.
	r := runCT(t, ctOptions{env: env}, "-q", "--", "sh", "-c", "id -u; id -g; id -G; echo $HOME")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	f := strings.Fields(r.stdout)
	if len(f) < 3 || f[0] != strconv.Itoa(u.UID) || f[1] != strconv.Itoa(u.GID) || !strings.Contains(r.stdout, strconv.Itoa(u.GroupGID)) ||
		!strings.Contains(r.stdout, u.Home) {
		t.Errorf("id under sudo: %q; want uid %d gid %d, group %d, HOME %s", r.stdout, u.UID, u.GID, u.GroupGID, u.Home)
	}

	// --user root under sudo: refused, nothing runs.
	marker := filepath.Join(userDir(t, u), "ran")
	r = runCT(t, ctOptions{env: env}, "-q", "--user", "root", "--", "sh", "-c", "id > "+marker)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--user is only for a real root login") || !strings.Contains(r.stderr, u.Name) {
		t.Errorf("--user root under sudo: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("--user root under sudo ran the command")
	}

	// --json /etc/<new file>: the user may not create it, so neither does
	// coldtrace.
	etc := fmt.Sprintf("/etc/coldtrace-test-%d.json", os.Getpid())
	defer os.Remove(etc)
	r = runCT(t, ctOptions{env: env}, "-q", "--json", etc, "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "as "+u.Name) {
		t.Errorf("--json %s under sudo: exit %d, stderr %q", etc, r.code, r.stderr)
	}
	if _, err := os.Lstat(etc); err == nil {
		t.Errorf("%s was created", etc)
	}

	// A root-only tree named by --cache-dir or by the command's
	// environment is neither listed nor sized into the record.
	private, err := os.MkdirTemp("", "coldtrace-private-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(private)
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(private, fmt.Sprintf("k%d.bin", i)), make([]byte, 64<<10), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := userDir(t, u)
	sized := func(env []string) (found, unreadable bool, size, files int64) {
		t.Helper()
		recPath := filepath.Join(out, "r.ctrace")
		os.Remove(recPath)
		r := runCT(t, ctOptions{env: env}, "-q", "--cache-dir", "secret="+private, "-o", recPath, "--",
			"env", "HF_HUB_CACHE="+private, "TRITON_CACHE_DIR="+private, "true")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		rec, err := record.ReadFile(recPath)
		if err != nil {
			t.Fatal(err)
		}
		if rec.JIT == nil {
			return false, false, 0, 0
		}
		for _, c := range rec.JIT.Caches {
			if c.Root == private {
				found = true
				unreadable = unreadable || c.Unreadable
				size += c.SizeBytes
				files += c.Files
			}
		}
		return found, unreadable, size, files
	}
	// As root (no sudo) the tree is sized: the check below can fail.
	if found, unreadable, size, files := sized(nil); !found || unreadable || size < 5*64<<10 || files != 5 {
		t.Errorf("as root: cache found %v (unreadable %v), %d bytes in %d files; want 5 files of 64 KiB", found, unreadable, size, files)
	}
	found, unreadable, size, files := sized(env)
	if size != 0 || files != 0 {
		t.Errorf("under sudo root sized a tree the user cannot list: %d bytes in %d files", size, files)
	}
	if found && !unreadable {
		t.Errorf("under sudo the record does not say the cache could not be read")
	}
}

// Arguments and environment values that are not UTF-8 reach the command
// byte for byte.
func TestNonUTF8ArgvReachesTheCommandUnchanged(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	name := filepath.Join(dir, "bad\xff\xfe.txt")
	if err := os.WriteFile(name, []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCT(t, ctOptions{env: []string{"CT_ODD=\xff\xfe"}}, "-q", "--", "cat", name)
	if r.code != 0 || r.stdout != "hi\n" {
		t.Errorf("cat of a non-UTF-8 name: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The environment too, byte for byte.
	r = runCT(t, ctOptions{env: []string{"CT_ODD=\xff\xfe"}}, "-q", "--", "sh", "-c", `printf %s "$CT_ODD"`)
	if r.code != 0 || r.stdout != "\xff\xfe" {
		t.Errorf("environment value: exit %d, stdout %q", r.code, r.stdout)
	}
}

// An argv above ~128 KiB starts (no E2BIG), every argument in order.
func TestArgvAbove128KiBStarts(t *testing.T) {
	requireTracing(t)
	args := []string{"-q", "--", "/bin/true"}
	for i := 1; i <= 25000; i++ {
		args = append(args, strconv.Itoa(i))
	}
	if r := runCT(t, ctOptions{}, args...); r.code != 0 {
		t.Fatalf("/bin/true $(seq 1 25000): exit %d, stderr %q", r.code, r.stderr)
	}
	// Every argument arrives, in order.
	args = []string{"-q", "--", "sh", "-c", `echo $# "$1" "$25000"`, "sh"}
	for i := 1; i <= 25000; i++ {
		args = append(args, strconv.Itoa(i))
	}
	if r := runCT(t, ctOptions{}, args...); r.code != 0 || r.stdout != "25000 1 25000\n" {
		t.Errorf("sh sees %q (exit %d, stderr %q), want \"25000 1 25000\"", r.stdout, r.code, r.stderr)
	}
}

// Under sudo a new output belongs to the user with the umask's mode, and
// a replaced file of the user keeps its owner and its 0600.
func TestOutputsBelongToTheUserAndKeepTheirMode(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	dir := userDir(t, u)
	fresh := filepath.Join(dir, "new.json")
	own := filepath.Join(dir, "mine.json")
	if err := os.WriteFile(own, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(own, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCT(t, ctOptions{env: sudoEnv(u), umask: "027"}, "-q", "--json", fresh, "-o", own, "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{fresh, 0o640}, {own, 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != c.mode || int(st.Uid) != u.UID || int(st.Gid) != u.GID {
			t.Errorf("%s: mode %o owner %d:%d, want %o %d:%d", c.path, fi.Mode().Perm(), st.Uid, st.Gid, c.mode, u.UID, u.GID)
		}
	}
	if _, err := record.ReadFile(own); err != nil {
		t.Errorf("the user's file was not replaced by the record: %v", err)
	}
}

// Signals reach the command's whole process group: a sh -c wrapper and
// its child both end on one SIGTERM, and the third SIGTERM kills the
// child of a wrapper that ignores TERM.
func TestSignalsReachTheCommandsProcessGroup(t *testing.T) {
	requireTracing(t)
	for _, c := range []struct {
		name     string
		duration string // of the sleep, unique, to find it in /proc
		script   string
		signals  int
		code     int
	}{
		// One TERM: the wrapper and its child both go.
		{"wrapper", "22.381", "sleep 22.381; true", 1, 128 + 15},
		// A wrapper that ignores TERM: three TERMs, sleep must not survive.
		{"trap", "22.382", `trap "" TERM; sleep 22.382`, 3, 128 + 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			sleepArgv := []string{"sleep", c.duration}
			cmd := exec.Command(ctBin, "-q", "--", "sh", "-c", c.script)
			cmd.Env = os.Environ()
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(15 * time.Second); len(processesRunning(sleepArgv...)) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("%v never started: %s", sleepArgv, errb.String())
				}
			}
			for range c.signals {
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("coldtrace did not end; stderr: %s", errb.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != c.code {
				t.Errorf("coldtrace ended with %v, want exit %d; stderr: %s", err, c.code, errb.String())
			}
			var left []string
			for i := 0; i < 50; i++ {
				if left = processesRunning(sleepArgv...); len(left) == 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("%v survived (pids %v)", sleepArgv, left)
				for _, p := range left {
					pid, _ := strconv.Atoi(p)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// File names a traced program chose, and the "cannot run" line, reach
// the terminal escaped: no raw control character.
func TestTracedStringsAreEscapedOnTheTerminal(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	evil := filepath.Join(dir, "a\x1b[2J\x1b[31mred\nnext")
	if err := os.WriteFile(evil, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCT(t, ctOptions{}, "--top", "50", "--", "cat", evil)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	noRawEscape(t, "the text report", r.stderr)
	if !strings.Contains(r.stderr, `a\x1b[2J\x1b[31mred\nnext`) {
		t.Errorf("the escaped file name is not in the report:\n%s", r.stderr)
	}
	r = runCT(t, ctOptions{}, "-q", "--", "\x1b[31mno-such-program")
	if r.code != 127 || !strings.Contains(r.stderr, `cannot run \x1b[31mno-such-program`) {
		t.Errorf("cannot run line: exit %d, stderr %q", r.code, r.stderr)
	}
	noRawEscape(t, "the cannot-run line", r.stderr)
}

// Command-line edge cases, one subtest each: diffing a record with
// itself, the JSON's interrupted key on a whole run, --json - and
// --json-fd, -o -, an empty --json, one path for two outputs, missing
// inputs, a script without #!, an out-of-range SUDO_UID, the launch
// shim's cost, and processes still running at exit.
func TestCommandLineEdgeCases(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	notRun := func(t *testing.T, what string) {
		t.Helper()
		if _, err := os.Stat(marker); err == nil {
			os.Remove(marker)
			t.Errorf("%s: the command ran", what)
		}
	}
	rec := filepath.Join(dir, "r.ctrace")
	if r := runCT(t, ctOptions{}, "-q", "-o", rec, "--", "true"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}

	t.Run("diff A A warns", func(t *testing.T) {
		r := runCT(t, ctOptions{}, "diff", rec, rec)
		if r.code != 0 || !strings.Contains(r.stderr, "are one record") {
			t.Errorf("diff A A: exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("interrupted in the JSON", func(t *testing.T) {
		out := filepath.Join(dir, "s.json")
		if r := runCT(t, ctOptions{}, "-q", "--json", out, "--", "true"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		var doc map[string]any
		b, _ := os.ReadFile(out)
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if v, ok := doc["interrupted"].(bool); !ok || v {
			t.Errorf("interrupted = %v (%T), want false", doc["interrupted"], doc["interrupted"])
		}
	})
	t.Run("--json - refused, --json-fd", func(t *testing.T) {
		r := runCT(t, ctOptions{}, "-q", "--json", "-", "--", "touch", marker)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--json-fd") {
			t.Errorf("--json - with the command on the same stdout: exit %d, stderr %q", r.code, r.stderr)
		}
		notRun(t, "--json -")
		fd3, err := os.Create(filepath.Join(dir, "fd3.json"))
		if err != nil {
			t.Fatal(err)
		}
		defer fd3.Close()
		r = runCT(t, ctOptions{extra: []*os.File{fd3}}, "-q", "--json-fd", "3", "--", "sh", "-c", "echo cmd-out; ls -l /proc/self/fd/3 2>/dev/null || echo no-fd3")
		if r.code != 0 || r.stdout != "cmd-out\nno-fd3\n" {
			t.Errorf("--json-fd 3: exit %d, stdout %q (the command must not inherit fd 3), stderr %q", r.code, r.stdout, r.stderr)
		}
		if s := readSummary(t, fd3.Name()); s.Schema == "" {
			t.Errorf("no summary on fd 3")
		}
		r = runCT(t, ctOptions{}, "-q", "--json-fd", "9", "--", "touch", marker)
		if r.code != exitUsage || !strings.Contains(r.stderr, "not an open descriptor") {
			t.Errorf("--json-fd of a closed descriptor: exit %d, stderr %q", r.code, r.stderr)
		}
		notRun(t, "--json-fd 9")
	})
	t.Run("-o -", func(t *testing.T) {
		r := runCT(t, ctOptions{}, "-q", "-o", "-", "--", "touch", marker)
		if r.code != exitUsage || !strings.Contains(r.stderr, "-o -") {
			t.Errorf("run -o -: exit %d, stderr %q", r.code, r.stderr)
		}
		notRun(t, "-o -")
		r = runCT(t, ctOptions{}, "report", "--json", "-o", "-", rec)
		if r.code != 0 || !strings.Contains(r.stdout, `"schema"`) {
			t.Errorf("report -o -: exit %d, stdout %.80q, stderr %q", r.code, r.stdout, r.stderr)
		}
		r = runCT(t, ctOptions{}, "diff", "-o", "-", rec, rec)
		if r.code != 0 || r.stdout == "" {
			t.Errorf("diff -o -: exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run(`--json ""`, func(t *testing.T) {
		r := runCT(t, ctOptions{}, "-q", "--json", "", "--", "touch", marker)
		if r.code != exitUsage || !strings.Contains(r.stderr, "empty path") {
			t.Errorf(`--json "": exit %d, stderr %q`, r.code, r.stderr)
		}
		notRun(t, `--json ""`)
	})
	t.Run("one path, two outputs", func(t *testing.T) {
		p := filepath.Join(dir, "same")
		r := runCT(t, ctOptions{}, "-q", "--json", p, "-o", p, "--", "touch", marker)
		if r.code != exitUsage || !strings.Contains(r.stderr, "same file") {
			t.Errorf("--json P -o P: exit %d, stderr %q", r.code, r.stderr)
		}
		notRun(t, "--json P -o P")
	})
	t.Run("missing inputs warn before the run", func(t *testing.T) {
		r := runCT(t, ctOptions{}, "-q", "--cache-dir", "k="+filepath.Join(dir, "nope"), "--jit-uprobe", "/nonexistent/libx.so:f",
			"--", "sh", "-c", "echo COMMAND-RAN >&2")
		ran := strings.Index(r.stderr, "COMMAND-RAN")
		for _, w := range []string{"--cache-dir k=", "--jit-uprobe /nonexistent/libx.so:f"} {
			i := strings.Index(r.stderr, w)
			if i < 0 || ran < 0 || i > ran {
				t.Errorf("no warning %q before the run: %q", w, r.stderr)
			}
		}
	})
	t.Run("script without #!", func(t *testing.T) {
		script := filepath.Join(dir, "plain")
		if err := os.WriteFile(script, []byte("echo by-sh \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := runCT(t, ctOptions{}, "-q", "--", script, "x", "y")
		if r.code != 0 || r.stdout != "by-sh x y\n" {
			t.Errorf("script without #!: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("SUDO_UID=4294967296", func(t *testing.T) {
		r := runCT(t, ctOptions{env: []string{"SUDO_UID=4294967296", "SUDO_GID=0", "SUDO_USER=root"}}, "-q", "--", "touch", marker)
		if r.code != exitUsage || !strings.Contains(r.stderr, "SUDO_UID") {
			t.Errorf("SUDO_UID=4294967296: exit %d, stderr %q", r.code, r.stderr)
		}
		notRun(t, "SUDO_UID=4294967296")
	})
	t.Run("the shim is not charged", func(t *testing.T) {
		p := filepath.Join(dir, "shim.ctrace")
		if r := runCT(t, ctOptions{}, "-q", "-o", p, "--", "/bin/true"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		r, err := record.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Processes) != 1 || r.Processes[0].Threads != 1 {
			t.Errorf("processes %+v; want /bin/true alone, one thread", r.Processes)
		}
		self, _ := os.Executable()
		for _, f := range r.Files {
			if f.Path == self {
				t.Errorf("coldtrace's own binary charged to the command: %+v", f)
			}
		}
	})
	t.Run("processes still running at exit", func(t *testing.T) {
		argv := []string{"sleep", "31.907"}
		t.Cleanup(func() {
			for _, p := range processesRunning(argv...) {
				pid, _ := strconv.Atoi(p)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		// The sleeps leave coldtrace's stdout and stderr, so the run ends with sh.
		r := runCT(t, ctOptions{}, "--", "sh", "-c", "sleep 31.907 >/dev/null 2>&1 & sleep 31.907 >/dev/null 2>&1 & exit 0")
		if r.code != 0 || !strings.Contains(r.stderr, "2 processes still running at exit, not traced further") ||
			!strings.Contains(r.stderr, "sleep") {
			t.Errorf("exit %d; report does not name the two sleeps still running:\n%s", r.code, r.stderr)
		}
	})
}

// The same refusal of non-regular outputs holds for a user's run under
// sudo: outfile's checks run with the user's rights.
func TestSudoRunRefusesNonRegularOutputs(t *testing.T) {
	testenv.RequireRoot(t)
	requireTracing(t)
	u := testuser.Create(t)
	r := runCT(t, ctOptions{env: sudoEnv(u)}, "-q", "--json", "/dev/null", "--", "true")
	if r.code != exitUsage || fileType(t, "/dev/null") != unix.S_IFCHR {
		t.Errorf("--json /dev/null under sudo: exit %d, stderr %q", r.code, r.stderr)
	}
	// report reads the record with the user's rights.
	private := filepath.Join(t.TempDir(), "r.ctrace") // t.TempDir is root's 0700
	data, err := os.ReadFile(fixtures.Path("truth-cold"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(private, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCT(t, ctOptions{env: sudoEnv(u)}, "report", private)
	if r.code != exitFailure || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("report of a root-only record under sudo: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A FIFO with exec bits as the command fails at once with 127 (opening
// it would wait for a writer forever), a SIGTERM early in the run ends it,
// and no BPF descriptor stays open.
func TestFIFOAsCommandFailsAtOnce(t *testing.T) {
	requireTracing(t)
	fifo := filepath.Join(t.TempDir(), "fc")
	if err := unix.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCT(t, ctOptions{timeout: 10 * time.Second}, "-q", "--", fifo)
	if r.code != 127 || !strings.Contains(r.stderr, "cannot run") || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("FIFO as the command: exit %d, stderr %q; want 127 and why", r.code, r.stderr)
	}
	// SIGTERM early in the run ends it too.
	cmd := exec.Command(ctBin, "-q", "--", fifo)
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("coldtrace with a FIFO command ignored SIGTERM for 10 s")
	}
}
