package launch

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/fdtable"
)

// TestDescriptorTableLeavesTheShimAlone: coldtrace's descriptor table is
// grown at its start unless argv[1] is the shim's (internal/fdtable), so
// the command's process starts with the table it would have had.
func TestDescriptorTableLeavesTheShimAlone(t *testing.T) {
	if fdtable.ShimArg != ShimArg {
		t.Errorf("internal/fdtable skips %q, the shim's argument is %q", fdtable.ShimArg, ShimArg)
	}
}

func TestCommandEnv(t *testing.T) {
	base := []string{"HOME=/root", "PATH=/bin", "USER=root"}
	u := actor.User{Name: "alice", Home: "/home/alice"}
	got := CommandEnv(base, u, true)
	want := map[string]bool{"PATH=/bin": true, "HOME=/home/alice": true, "USER=alice": true, "LOGNAME=alice": true}
	if len(got) != len(want) {
		t.Fatalf("env %v", got)
	}
	for _, kv := range got {
		if !want[kv] {
			t.Errorf("unexpected %q in %v", kv, got)
		}
	}
	if got := CommandEnv(base, u, false); len(got) != 3 {
		t.Errorf("no switch changed the env: %v", got)
	}
}

// TestSpecBytes: argv and environment survive the trip to the shim byte
// for byte, whatever their size or encoding.
func TestSpecBytes(t *testing.T) {
	argv := []string{"cat", "bad\xff\xfe.txt", "", "a\x01b"}
	for i := range 25000 {
		argv = append(argv, strconv.Itoa(i))
	}
	in := Spec{Argv: argv, Env: []string{"X=\xff", "EMPTY="}, SwitchUser: true,
		User: actor.User{UID: 4294967294, GID: 7, Groups: []int{7, 8}}}
	out, err := decodeSpec(in.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.Argv, out.Argv) || !slices.Equal(in.Env, out.Env) || !slices.Equal(in.User.Groups, out.User.Groups) ||
		out.User.UID != in.User.UID || out.User.GID != 7 || !out.SwitchUser {
		t.Errorf("spec changed on the way: %+v", out.User)
	}
	enc := in.encode()
	for _, cut := range []int{0, 5, len(enc) / 2, len(enc) - 1} {
		if _, err := decodeSpec(enc[:cut]); err == nil {
			t.Errorf("truncated spec (%d of %d bytes) accepted", cut, len(enc))
		}
	}
}

func TestFindProgram(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "prog")
	if err := os.WriteFile(exe, []byte("echo hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/nonexistent:" + dir}
	if p, err := findProgram("prog", env); err != nil || p != exe {
		t.Errorf("findProgram(prog) = %q, %v", p, err)
	}
	if _, err := findProgram("missing-coldtrace-prog", env); err != syscall.ENOENT {
		t.Errorf("missing program: %v, want ENOENT", err)
	}
	// No execute bit at all: EACCES, for root too.
	if _, err := findProgram("noexec", env); err != syscall.EACCES {
		t.Errorf("non-executable program: %v, want EACCES", err)
	}
	if p, err := findProgram("./x/y", nil); err != nil || p != "./x/y" {
		t.Errorf("a name with a slash is used as is: %q, %v", p, err)
	}
}

// startAndWait runs argv through the real shim (this test binary) and
// returns the start error and exit code.
func startAndWait(t *testing.T, argv []string) (int, error) {
	t.Helper()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	c, err := Start(Spec{Argv: argv, Env: []string{"PATH=/usr/bin:/bin", "CT_ODD=\xff\xfe"}},
		Stdio{Stdin: devnull, Stdout: devnull, Stderr: os.Stderr}, false)
	if err != nil {
		t.Fatal(err)
	}
	startErr := c.Release()
	return c.Wait().ExitCode(), startErr
}

// TestShimExecsByteForByte: through the shim, argv and environment reach
// the command unchanged (non-UTF-8, 25,000 arguments), a script without
// "#!" runs under /bin/sh, and a FIFO with execute bits fails at exec
// instead of blocking.
func TestShimExecsByteForByte(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	argv := []string{"sh", "-c", `printf '%s|%s|%s' "$#" "$1" "$CT_ODD" > "$0"`, out, "bad\xff\xfe.txt"}
	for i := range 25000 {
		argv = append(argv, strconv.Itoa(i))
	}
	if code, err := startAndWait(t, argv); err != nil || code != 0 {
		t.Fatalf("start error %v, exit %d", err, code)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := "25001|bad\xff\xfe.txt|\xff\xfe"; string(got) != want {
		t.Errorf("the command saw %q, want %q", got, want)
	}

	script := filepath.Join(dir, "plain")
	if err := os.WriteFile(script, []byte("echo ran > \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, err := startAndWait(t, []string{script, out}); err != nil || code != 0 {
		t.Fatalf("script without #!: start error %v, exit %d", err, code)
	}
	if got, _ := os.ReadFile(out); string(got) != "ran\n" {
		t.Errorf("script without #! wrote %q", got)
	}

	fifo := filepath.Join(dir, "fc")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, err := startAndWait(t, []string{fifo}); err == nil || code != 127 || !strings.Contains(err.Error(), fifo+" is a FIFO, not an executable") {
		t.Errorf("FIFO as the command: start error %v, exit %d; want 127 and the FIFO named", err, code)
	}
	if _, err := startAndWait(t, []string{"no-such-program-coldtrace"}); err == nil {
		t.Errorf("a missing program started")
	}
}

// A FIFO, socket or device is named for what it is; a program, a
// directory or a path not there is not.
func TestNotProgramNamesTheKind(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "a FIFO", sock: "a socket", "/dev/null": "a character device",
		"/bin/sh": "", dir: "", filepath.Join(dir, "absent"): ""} {
		if got := notProgram(path); got != want {
			t.Errorf("notProgram(%s) = %q, want %q", path, got, want)
		}
	}
}

// TestShimHandsItsProgramsOver: before the release, the shim's
// descriptors give the program it found (PATH searched with the
// command's own environment) and the programs its arguments name; the
// command inherits none of them; a FIFO found as the program, or more
// arguments than are looked at, give none.
func TestShimHandsItsProgramsOver(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "fds")
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	env := []string{"PATH=/usr/bin:/bin"}
	inode := func(p string) [2]uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return [2]uint64{st.Dev, st.Ino}
	}
	found := func(name string) string {
		p, err := findProgram(name, env)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	start := func(argv []string) *Child {
		c, err := Start(Spec{Argv: argv, Env: env}, Stdio{Stdin: devnull, Stdout: devnull, Stderr: os.Stderr}, false)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	handed := func(c *Child) (got [][2]uint64, err error) {
		fs, err := c.FirstPrograms()
		for _, f := range fs {
			var st syscall.Stat_t
			if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			got = append(got, [2]uint64{st.Dev, st.Ino})
			f.Close()
		}
		return got, err
	}

	c := start([]string{"sh", "-c", `for f in /proc/$$/fd/*; do readlink "$f"; done > "$0"; exit 0; env X=1 true --flag`, out})
	got, err := handed(c)
	if err != nil {
		t.Fatalf("the shim handed no programs over: %v", err)
	}
	// sh itself, then readlink, env and true named in the script ("for",
	// "do" and the rest are in no PATH directory; /proc/$$/fd/* is no file).
	want := [][2]uint64{inode(found("sh")), inode(found("readlink")), inode(found("env")), inode(found("true"))}
	if !slices.Equal(got, want) {
		t.Errorf("programs handed over %v, want %v (sh, readlink, env, true)", got, want)
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if code := c.Wait().ExitCode(); code != 0 {
		t.Fatalf("the command exited %d", code)
	}
	fds, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(fds)), "\n") {
		if st, err := os.Stat(l); err == nil && st.Mode().IsRegular() && strings.HasPrefix(l, "/usr/bin/") {
			t.Errorf("the command inherited a shim's descriptor of a program: %q", fds)
		}
	}

	fifo := filepath.Join(dir, "fc")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	long := []string{"true"}
	for i := 0; i < maxFirstArgs; i++ {
		long = append(long, "x")
	}
	for _, argv := range [][]string{{fifo}, long} {
		c := start(argv)
		if got, err := handed(c); err == nil {
			t.Errorf("%.40q: programs %v handed over, want none", argv, got)
		}
		c.Abort()
	}
}
