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
// read and the unmount, quiet machine).
func TestReaderGoneWithItsMountsNamesTheFileAsItSawIt(t *testing.T) {
	requireTracing(t)
	reader := buildC(t, "bind_view_read")
	uring := buildC(t, "uring_async_read")
	const size = 4 << 20
	for _, c := range []struct {
		mode string
		args []string
	}{
		{"read", nil},
		{"mmap", nil},
		{"run", []string{uring, "{}", "65536", "async"}},
	} {
		f := e2eutil.EvictableFile(t, size)
		view := filepath.Join(t.TempDir(), "the view")
		if err := os.Mkdir(view, 0o755); err != nil {
			t.Fatal(err)
		}
		w := traceWaits(t, append([]string{reader, filepath.Dir(f), view, filepath.Base(f), c.mode}, c.args...)...)
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
			t.Logf("%s: %q (host %q): %d pages accessed, %d missed", c.mode, rf.Path, rf.HostPath, rf.PagesAccessed, rf.PagesMissed)
			if rf.Path != want || rf.HostPath != f {
				t.Errorf("%s: named %q, host name %q; want %q, host name %q", c.mode, rf.Path, rf.HostPath, want, f)
			}
			if rf.PagesAccessed != size/4096 {
				t.Errorf("%s: %d pages accessed, want %d", c.mode, rf.PagesAccessed, size/4096)
			}
		}
		if !found {
			t.Errorf("%s: no entry of %s (inode %d) among the record's %d files", c.mode, f, ino, len(w.rec.Files))
		}
	}
}
