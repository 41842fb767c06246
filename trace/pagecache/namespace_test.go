package pagecache

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testenv"
)

// bindFixture is a file in src, a view directory to bind-mount src on,
// and the file's device, inode and path inside its file system.
type bindFixture struct {
	src, view, file string
	dev             uint32
	ino             uint64
	fsPath          string
}

// viewed is the file's path through the bind mount.
func (f bindFixture) viewed() string { return filepath.Join(f.view, "model.bin") }

func newBindFixture(t *testing.T) bindFixture {
	t.Helper()
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1) to make a mount namespace")
	}
	dir := t.TempDir()
	f := bindFixture{src: filepath.Join(dir, "src"), view: filepath.Join(dir, "view")}
	for _, d := range []string{f.src, f.view} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.file = filepath.Join(f.src, "model.bin")
	if err := os.WriteFile(f.file, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(f.file, &st); err != nil {
		t.Fatal(err)
	}
	f.dev = kernelDev(unix.Major(st.Dev), unix.Minor(st.Dev))
	f.ino = st.Ino
	f.fsPath = hostFSPath(t, f.dev, f.file)
	return f
}

// nsShell is a shell alone in a private mount namespace of its own,
// running script with the fixture's src and view as $1 and $2; it says
// words on its stdout and reads lines from its stdin.
type nsShell struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int32
	ns    uint32 // its mount namespace's inode number
}

func startNSShell(t *testing.T, f bindFixture, script string) *nsShell {
	t.Helper()
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", f.src, f.view)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &nsShell{cmd: cmd, stdin: stdin, out: bufio.NewReader(out), pid: int32(cmd.Process.Pid)}
	t.Cleanup(func() {
		s.stdin.Close()
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	return s
}

// expect reads the shell's next line, which must be word; the first one
// also gives the namespace, which the shell is in by then.
func (s *nsShell) expect(t *testing.T, word string) {
	t.Helper()
	line, err := s.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != word {
		t.Fatalf("the namespace's shell said %q, %v; want %q", line, err, word)
	}
	if s.ns == 0 {
		var st unix.Stat_t
		if err := unix.Stat("/proc/"+strconv.Itoa(int(s.pid))+"/ns/mnt", &st); err != nil {
			t.Fatal(err)
		}
		s.ns = uint32(st.Ino)
	}
}

// TestLoneNamespaceNamedAfterItsLastProcess: a process alone in a mount
// namespace of its own, with a bind mount in it, is seen once while it
// lives; after it exits, its file is still named as it saw it, through
// the namespace held open at that first sight (before, no process was
// left to read the namespace's mounts through, and it was not named).
func TestLoneNamespaceNamedAfterItsLastProcess(t *testing.T) {
	f := newBindFixture(t)
	// The namespace's one process mounts, says so, and exits when told.
	sh := startNSShell(t, f, `mount --bind "$1" "$2" && echo ok && read x; exit 0`)
	sh.expect(t, "ok")

	var n nsPaths
	defer n.close()
	if got, ok := n.resolve(sh.pid, sh.ns, 0, f.dev, f.ino, f.fsPath); !ok || got != f.viewed() {
		t.Fatalf("while the process lives: %q, %v; want %q", got, ok, f.viewed())
	}
	sh.stdin.Close()
	if err := sh.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// A later path of the namespace, its process gone: its table is
	// read again (through the held mountinfo) and the path checked
	// through the held root.
	time.Sleep(2 * rereadAfter)
	delete(n.tables, "mnt:["+strconv.FormatUint(uint64(sh.ns), 10)+"]")
	if got, ok := n.resolve(sh.pid, sh.ns, ^uint64(0), f.dev, f.ino, f.fsPath); !ok || got != f.viewed() {
		t.Errorf("after the process exited: %q, %v; want %q", got, ok, f.viewed())
	}
}

// TestNamespaceMountedAfterItsFirstPathIsReadAgain: a namespace whose
// first path came before its bind mount (unshare -m, a file touched,
// then mount --bind) has its mounts read again for a later path through
// the bind mount: the table read at the first path still resolves it,
// through the mount the host sees it by, so only the kernel's flag on
// the held mountinfo tells that the mounts changed.
func TestNamespaceMountedAfterItsFirstPathIsReadAgain(t *testing.T) {
	f := newBindFixture(t)
	sh := startNSShell(t, f, `echo in && read x && mount --bind "$1" "$2" && echo ok && read y; exit 0`)
	sh.expect(t, "in")

	var n nsPaths
	defer n.close()
	if got, ok := n.resolve(sh.pid, sh.ns, 0, f.dev, f.ino, f.fsPath); !ok || got != f.file {
		t.Fatalf("before the bind mount: %q, %v; want %q", got, ok, f.file)
	}
	if _, err := sh.stdin.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	sh.expect(t, "ok")
	if got, ok := n.resolve(sh.pid, sh.ns, 0, f.dev, f.ino, f.fsPath); !ok || got != f.viewed() {
		t.Errorf("after the bind mount: %q, %v; want %q", got, ok, f.viewed())
	}
}

// TestNamespaceHeldThroughAnotherProcessWhenTheReaderIsGone: the process
// that touched a file was alive when its namespace was looked up, but is
// gone by the time the namespace is held (a reader that exits while its
// first path is resolved: beside busy loops a grandchild's file went by
// the host's name so, its parent alive in the namespace all along). The
// namespace is held through another of its processes, and the file is
// named as the namespace sees it.
func TestNamespaceHeldThroughAnotherProcessWhenTheReaderIsGone(t *testing.T) {
	f := newBindFixture(t)
	// The shell mounts, starts a child that says its pid and exits, and
	// lives on until told.
	sh := startNSShell(t, f, `mount --bind "$1" "$2" && echo ok && sh -c 'echo $$' && read x; exit 0`)
	sh.expect(t, "ok")
	line, err := sh.out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child := strings.TrimSpace(line)
	for deadline := time.Now().Add(2 * time.Second); mountNS(child) != "" && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // reaped by the shell a moment after it spoke
	}
	if mountNS(child) != "" {
		t.Fatalf("the namespace's child %s is still there", child)
	}
	ns := "mnt:[" + strconv.FormatUint(uint64(sh.ns), 10) + "]"
	n := nsPaths{self: mountNS("self"), tables: map[string]mountTable{}, pids: map[string][]string{ns: {child}}}
	defer n.close()
	if got, want := n.holdVia(ns, child), strconv.Itoa(int(sh.pid)); got != want {
		t.Fatalf("held through %q, want the shell %s", got, want)
	}
	if _, ok := n.held[ns]; !ok {
		t.Fatal("the namespace is not held")
	}
	if got, ok := n.resolve(sh.pid, sh.ns, 0, f.dev, f.ino, f.fsPath); !ok || got != f.viewed() {
		t.Errorf("the file: %q, %v; want %q", got, ok, f.viewed())
	}
}

// hostFSPath is path's path inside its file system, from coldtrace's
// own mount table.
func hostFSPath(t *testing.T, dev uint32, path string) string {
	t.Helper()
	mt, err := readMountTable("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	best, fsPath := -1, ""
	for _, m := range mt[dev] {
		mp := strings.TrimSuffix(m.mountPoint, "/")
		if strings.HasPrefix(path, mp+"/") && len(mp) > best {
			best, fsPath = len(mp), filepath.Join(m.root, strings.TrimPrefix(path, mp))
		}
	}
	if best < 0 {
		t.Skipf("no mount of %s's device in /proc/self/mountinfo", path)
	}
	return fsPath
}

// TestForeignReadsEachProcessNamespaceOnce: at the end of a run (and at
// each checkpoint) a file is looked up in its last process's namespace
// only when that process lives in another one than coldtrace's, and each
// process's namespace is read once per pass over the files, however many
// files it touched.
func TestForeignReadsEachProcessNamespaceOnce(t *testing.T) {
	f := newBindFixture(t)
	sh := startNSShell(t, f, `echo ok && read x; exit 0`)
	sh.expect(t, "ok")
	shellNS := nsName(sh.ns)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	var n nsPaths
	seen := pidNamespaces{}
	for range 3 {
		if ns := n.foreignNS(int32(os.Getpid()), seen); ns != "" {
			t.Errorf("coldtrace's own process: foreign (%s)", ns)
		}
		if ns := n.foreignNS(int32(gone.Process.Pid), seen); ns != "" {
			t.Errorf("a process gone: foreign (%s)", ns)
		}
		if ns := n.foreignNS(sh.pid, seen); ns != shellNS {
			t.Errorf("a process of another mount namespace: %q, want %q", ns, shellNS)
		}
		if ns := n.foreignNS(0, seen); ns != "" {
			t.Errorf("no process: foreign (%s)", ns)
		}
	}
	if len(seen) != 3 || seen[int32(gone.Process.Pid)] != "" {
		t.Errorf("namespaces read: %v, want the three processes' (none for the one gone)", seen)
	}
	// Once read, a process's namespace is not read again in the pass.
	sh.stdin.Close()
	sh.cmd.Wait()
	if ns := n.foreignNS(sh.pid, seen); ns != shellNS {
		t.Errorf("the shell's namespace read again after it exited: %q", ns)
	}
	if ns := n.foreignNS(sh.pid, pidNamespaces{}); ns != "" {
		t.Errorf("a new pass: the shell that exited is still foreign (%s)", ns)
	}
	// The namespace a pass found resolves the file as its process saw
	// it, with no second read of the process's link.
	sh2 := startNSShell(t, f, `mount --bind "$1" "$2" && echo ok && read x; exit 0`)
	sh2.expect(t, "ok")
	ns := n.foreignNS(sh2.pid, seen)
	if got, ok := n.resolveIn(ns, strconv.Itoa(int(sh2.pid)), 0, f.dev, f.ino, f.fsPath); !ok || got != f.viewed() {
		t.Errorf("the file in the pass's namespace: %q, %v; want %q", got, ok, f.viewed())
	}
	n.close()
}
