package download

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func TestCacheOf(t *testing.T) {
	caches := []record.Cache{
		{Name: "xdg", Root: "/home/u/.cache"},
		{Name: "huggingface", Root: "/home/u/.cache/huggingface/hub/"},
		{Name: "torch", Root: "/home/u/.cache/torch"},
	}
	cases := map[string]string{
		"/home/u/.cache/huggingface/hub/models--a--b/blobs/x": "huggingface",
		"/home/u/.cache/torchvision/x":                        "xdg",
		"/home/u/.cache/torch/hub/checkpoints/r.pth":          "torch",
		"/home/u/model.bin":                                   "",
	}
	for path, want := range cases {
		if got := cacheOf(path, caches); got != want {
			t.Errorf("cacheOf(%s) = %q, want %q", path, got, want)
		}
	}
}

func TestLocateFollowsARenameInPlace(t *testing.T) {
	dir := t.TempDir()
	tmp, final, gone := filepath.Join(dir, "x.incomplete"), filepath.Join(dir, "x"), filepath.Join(dir, "deleted.tmp")
	for _, p := range []string{tmp, gone, filepath.Join(dir, "other")} {
		if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := func(p string) (uint32, uint64) {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return kernelDev(&st), st.Ino
	}
	dev, ino := id(tmp)
	gdev, gino := id(gone)
	if err := os.Rename(tmp, final); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	locate := fileLocator([]record.File{{Dev: dev, Ino: ino, Path: tmp}, {Dev: gdev, Ino: gino, Path: gone}}, nil, nil)
	if l := locate(dev, ino); l != (Located{Path: final, WrittenPath: tmp}) {
		t.Errorf("renamed file: %+v", l)
	}
	// Without a handle, a file missing from its directory may have been
	// deleted or renamed elsewhere: the record says it does not know.
	if l := locate(gdev, gino); l != (Located{Path: gone, NameUnknown: true}) {
		t.Errorf("deleted file: %+v", l)
	}
	if l := locate(dev, ino+1000); l.Path != "" {
		t.Errorf("unknown file located at %q", l.Path)
	}
}

// TestOpenPath: a file the page-cache sensor never saw (tmpfs) is named
// from its writer's open descriptor, and located after its rename.
func TestOpenPath(t *testing.T) {
	dir := t.TempDir()
	tmp, final := filepath.Join(dir, "blob.incomplete"), filepath.Join(dir, "blob")
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	key := FileKey{Dev: kernelDev(&st), Ino: st.Ino}
	p := openPath(uint32(os.Getpid()), key)
	if p != tmp {
		t.Fatalf("openPath = %q, want %q", p, tmp)
	}
	if q := openPath(uint32(os.Getpid()), FileKey{Dev: key.Dev, Ino: key.Ino + 1000}); q != "" {
		t.Errorf("a file not open named %q", q)
	}
	if err := os.Rename(tmp, final); err != nil {
		t.Fatal(err)
	}
	locate := fileLocator(nil, map[FileKey]string{key: p}, nil)
	if l := locate(key.Dev, key.Ino); l != (Located{Path: final, WrittenPath: tmp}) {
		t.Errorf("renamed file: %+v", l)
	}
}

func TestHubName(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "models--org--m")
	blob := filepath.Join(repo, "blobs", "abc")
	for _, d := range []string{filepath.Dir(blob), filepath.Join(repo, "snapshots", "rev", "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(blob, []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "blobs", "other"), []byte("o"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../blobs/other", filepath.Join(repo, "snapshots", "rev", "sub", "config.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../blobs/abc", filepath.Join(repo, "snapshots", "rev", "sub", "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if got := hubName(blob); got != "sub/model.safetensors" {
		t.Errorf("hubName = %q, want sub/model.safetensors", got)
	}
	if got := hubName(filepath.Join(repo, "blobs", "missing")); got != "" {
		t.Errorf("hubName of a missing blob = %q", got)
	}
}
