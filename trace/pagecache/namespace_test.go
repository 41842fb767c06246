package pagecache

import (
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

// TestLoneNamespaceNamedAfterItsLastProcess: a process alone in a mount
// namespace of its own, with a bind mount in it, is seen once while it
// lives; after it exits, its file is still named as it saw it, through
// the namespace held open at that first sight (before, no process was
// left to read the namespace's mounts through, and it was not named).
func TestLoneNamespaceNamedAfterItsLastProcess(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1) to make a mount namespace")
	}
	dir := t.TempDir()
	src, view := filepath.Join(dir, "src"), filepath.Join(dir, "view")
	for _, d := range []string{src, view} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(src, "model.bin")
	if err := os.WriteFile(file, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	dev := kernelDev(unix.Major(st.Dev), unix.Minor(st.Dev))
	fsPath := hostFSPath(t, dev, file)

	// The namespace's one process mounts, says so, and exits when told.
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount --bind \"$1\" \"$2\" && echo ok && read x; exit 0", "sh", src, view)
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
	buf := make([]byte, 3)
	if n, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "ok") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("unshare -m; mount --bind: %q, %v", buf[:n], err)
	}
	pid := int32(cmd.Process.Pid)
	var nsSt unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(int(pid))+"/ns/mnt", &nsSt); err != nil {
		t.Fatal(err)
	}
	nsInum := uint32(nsSt.Ino)

	var n nsPaths
	defer n.close()
	if got, ok := n.resolve(pid, nsInum, 0, dev, st.Ino, fsPath); !ok || got != filepath.Join(view, "model.bin") {
		t.Fatalf("while the process lives: %q, %v; want %q", got, ok, filepath.Join(view, "model.bin"))
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// A later path of the namespace, its process gone: its table is
	// read again (through the held mountinfo) and the path checked
	// through the held root.
	time.Sleep(2 * rereadAfter)
	delete(n.tables, "mnt:["+strconv.FormatUint(uint64(nsInum), 10)+"]")
	if got, ok := n.resolve(pid, nsInum, ^uint64(0), dev, st.Ino, fsPath); !ok || got != filepath.Join(view, "model.bin") {
		t.Errorf("after the process exited: %q, %v; want %q", got, ok, filepath.Join(view, "model.bin"))
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

// TestNamespaceMountedAfterItsFirstPathIsReadAgain: a namespace whose
// first path came before its bind mount (unshare -m, a file touched,
// then mount --bind) has its mounts read again for a later path through
// the bind mount: the table read at the first path still resolves it,
// through the mount the host sees it by, so only the kernel's flag on
// the held mountinfo tells that the mounts changed.
func TestNamespaceMountedAfterItsFirstPathIsReadAgain(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1) to make a mount namespace")
	}
	dir := t.TempDir()
	src, view := filepath.Join(dir, "src"), filepath.Join(dir, "view")
	for _, d := range []string{src, view} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(src, "model.bin")
	if err := os.WriteFile(file, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	dev := kernelDev(unix.Major(st.Dev), unix.Minor(st.Dev))
	fsPath := hostFSPath(t, dev, file)

	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"echo in && read x && mount --bind \"$1\" \"$2\" && echo ok && read y; exit 0", "sh", src, view)
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
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	expect := func(word string) {
		t.Helper()
		buf := make([]byte, 3)
		if n, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), word) {
			cmd.Process.Kill()
			t.Fatalf("the namespace's shell said %q, %v; want %q", buf[:n], err, word)
		}
	}
	expect("in")
	pid := int32(cmd.Process.Pid)
	var nsSt unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(int(pid))+"/ns/mnt", &nsSt); err != nil {
		t.Fatal(err)
	}
	nsInum := uint32(nsSt.Ino)

	var n nsPaths
	defer n.close()
	if got, ok := n.resolve(pid, nsInum, 0, dev, st.Ino, fsPath); !ok || got != file {
		t.Fatalf("before the bind mount: %q, %v; want %q", got, ok, file)
	}
	if _, err := stdin.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	expect("ok")
	if got, ok := n.resolve(pid, nsInum, 0, dev, st.Ino, fsPath); !ok || got != filepath.Join(view, "model.bin") {
		t.Errorf("after the bind mount: %q, %v; want %q", got, ok, filepath.Join(view, "model.bin"))
	}
}
