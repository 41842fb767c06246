package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
)

// TestReaderGoneWithItsMountsNamesTheFileAsItSawIt: a reader alone in a
// mount namespace of its own reads a cold file through a bind mount,
// unmounts it and exits microseconds later, before coldtrace's user
// space can read the namespace's mounts (they no longer show the bind
// mount, or the namespace is gone). The file is named as the reader
// saw it, with the host's name beside it, whether it was read with
// read(2), mapped with its descriptor closed, or read by an io_uring
// reader in a child: the path it used is walked through its mounts in
// the kernel at its first touch. Read from the namespace's mount table
// it went by the host's name (one case in two with a shell between the
// read and the unmount, quiet machine). The same through an overlay of
// the file's directory (a container's image), read through a descriptor
// (the overlay file's real file owns the page cache, and the overlay's
// path is the one the reader used) or mapped with the descriptor closed
// (the mapping's file is the layer's backing file, which keeps the
// overlay path), and through an overlay mounted in coldtrace's own
// namespace, read, mapped, sent (sendfile) or read by io_uring by a
// reader of that namespace.
func TestReaderGoneWithItsMountsNamesTheFileAsItSawIt(t *testing.T) {
	requireTracing(t)
	reader := buildC(t, "bind_view_read")
	uring := buildC(t, "uring_async_read")
	const size = 4 << 20
	for _, c := range []struct {
		overlay, hostNS bool
		mode            string
		args            []string
	}{
		{false, false, "read", nil},
		{false, false, "mmap", nil},
		{false, false, "run", []string{uring, "{}", "65536", "async"}},
		{true, false, "read", nil},
		{true, false, "mmap", nil},
		{true, false, "run", []string{uring, "{}", "65536", "async"}},
		{true, true, "read", nil},
		{true, true, "mmap", nil},
		{true, true, "sendfile", nil},
		{true, true, "run", []string{uring, "{}", "65536", "inline"}},
	} {
		f := e2eutil.EvictableFile(t, size)
		view := filepath.Join(t.TempDir(), "the view")
		if err := os.Mkdir(view, 0o755); err != nil {
			t.Fatal(err)
		}
		argv := []string{reader}
		if c.hostNS {
			argv = append(argv, "-n")
		}
		if c.overlay {
			argv = append(argv, "-o", t.TempDir())
		}
		argv = append(argv, filepath.Dir(f), view, filepath.Base(f), c.mode)
		w := traceWaits(t, append(argv, c.args...)...)
		var st unix.Stat_t
		if err := unix.Stat(f, &st); err != nil {
			t.Fatal(err)
		}
		ino := st.Ino
		want := filepath.Join(view, filepath.Base(f))
		found := false
		for _, rf := range w.rec.Files {
			if rf.Ino != ino {
				continue
			}
			found = true
			t.Logf("%s (overlay %v, host namespace %v): %q (host %q): %d pages accessed, %d missed", c.mode, c.overlay, c.hostNS, rf.Path, rf.HostPath, rf.PagesAccessed, rf.PagesMissed)
			if rf.Path != want || rf.HostPath != f {
				t.Errorf("%s (overlay %v, host namespace %v): named %q, host name %q; want %q, host name %q", c.mode, c.overlay, c.hostNS, rf.Path, rf.HostPath, want, f)
			}
			if rf.PagesAccessed != size/4096 {
				t.Errorf("%s (overlay %v, host namespace %v): %d pages accessed, want %d", c.mode, c.overlay, c.hostNS, rf.PagesAccessed, size/4096)
			}
		}
		if !found {
			t.Errorf("%s (overlay %v, host namespace %v): no entry of %s (inode %d) among the record's %d files", c.mode, c.overlay, c.hostNS, f, ino, len(w.rec.Files))
		}
	}
}
