package filehandle

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testenv"
)

// TestTakeByNumberFollowsAFileRenamedBeforeItsHandle: a file renamed
// deep into another directory before any handle of it was taken is
// found by the handle its number and generation make (the format
// checked on its first name's directory); a handle of the same number
// with another generation finds nothing, and the file, once deleted, is
// gone.
func TestTakeByNumberFollowsAFileRenamedBeforeItsHandle(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.EXT4_SUPER_MAGIC {
		t.Skipf("%s is not on ext4 (magic %#x): its handles may not be number and generation", dir, fs.Type)
	}
	stage, final := filepath.Join(dir, "stage"), filepath.Join(dir, "a", "b", "c", "d")
	for _, d := range []string{stage, final} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	first, now := filepath.Join(stage, "obj.o.incomplete"), filepath.Join(final, "obj.o")
	f, err := os.Create(first)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := Generation(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Rename(first, now); err != nil {
		t.Fatal(err)
	}
	k := Key{Dev: unix.Major(st.Dev)<<20 | unix.Minor(st.Dev), Ino: st.Ino, Gen: gen}

	s := New(16)
	defer s.Close()
	if !s.TakeByNumber(k, first, stage) {
		t.Fatalf("no handle made of %+v on ext4", k)
	}
	if path, gone, err := s.Resolve(k); err != nil || gone || path != now {
		t.Errorf("resolve: %q, gone %v, %v; want %q", path, gone, err, now)
	}
	other := k
	other.Gen++
	if !s.TakeByNumber(other, first, stage) {
		t.Fatal("no handle made of another generation")
	}
	if path, gone, err := s.Resolve(other); err != nil || !gone {
		t.Errorf("another generation: %q, gone %v, %v; want gone", path, gone, err)
	}
	if err := os.Remove(now); err != nil {
		t.Fatal(err)
	}
	if path, gone, err := s.Resolve(k); err != nil || !gone {
		t.Errorf("after the file was deleted: %q, gone %v, %v; want gone", path, gone, err)
	}
}
