package download

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// fileKey is path's file as the probes name it.
func fileKey(t *testing.T, path string) FileKey {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return FileKey{Dev: kernelDev(&st), Ino: st.Ino}
}

// TestHandleFollowsARenameIntoAnotherDirectory: a handle taken while the
// file is open under its temporary name finds it at the end under its
// final name in another directory; a deleted file is gone.
func TestHandleFollowsARenameIntoAnotherDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("open_by_handle_at needs CAP_DAC_READ_SEARCH: run as root")
	}
	dir := t.TempDir()
	stage, final := filepath.Join(dir, "stage", "blobs"), filepath.Join(dir, "hub", "blobs")
	for _, d := range []string{stage, final} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tmp, gone := filepath.Join(stage, "abc.incomplete"), filepath.Join(stage, "deleted.tmp")
	var keys []FileKey
	for _, p := range []string{tmp, gone} {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		keys = append(keys, fileKey(t, p))
	}
	hs := newHandles()
	defer hs.close()
	hs.takeOpen(int32(os.Getpid()))
	blob := filepath.Join(final, "abc")
	if err := os.Rename(tmp, blob); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	p, isGone, err := hs.resolve(keys[0])
	if err != nil || p != blob || isGone {
		t.Errorf("renamed file: %q, gone %v, %v; want %s", p, isGone, err, blob)
	}
	if hs.first(keys[0]) != tmp {
		t.Errorf("first name %q, want %s", hs.first(keys[0]), tmp)
	}
	if _, isGone, err := hs.resolve(keys[1]); err != nil || !isGone {
		t.Errorf("deleted file: gone %v, %v; want gone", isGone, err)
	}
}
