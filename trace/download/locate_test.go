package download

import (
	"os"
	"path/filepath"
	"strconv"
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
	k, g := fileKey(t, tmp), fileKey(t, gone)
	if err := os.Rename(tmp, final); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	locate := fileLocator([]record.File{{Dev: k.Dev, Ino: k.Ino, Gen: k.Gen, Path: tmp}, {Dev: g.Dev, Ino: g.Ino, Gen: g.Gen, Path: gone}}, nil, nil)
	if l := locate(k); l != (Located{Path: final, WrittenPath: tmp}) {
		t.Errorf("renamed file: %+v", l)
	}
	// Without a handle, a file missing from its directory may have been
	// deleted or renamed elsewhere: the record says it does not know.
	if l := locate(g); l != (Located{Path: gone, NameUnknown: true}) {
		t.Errorf("deleted file: %+v", l)
	}
	if l := locate(FileKey{Dev: k.Dev, Ino: k.Ino + 1000}); l.Path != "" {
		t.Errorf("unknown file located at %q", l.Path)
	}
}

// reuseNumber deletes the file at old and creates files in dir until
// one is given its inode number, each under name while it is tried (the
// others are kept aside, so the numbers move on); it returns that file's
// key, or skips when none was within 200 files or the filesystem keeps
// no generation to tell the two apart.
func reuseNumber(t *testing.T, old FileKey, oldPath, dir, name string) FileKey {
	t.Helper()
	if err := os.Remove(oldPath); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("new"), 0o644); err != nil {
			t.Fatal(err)
		}
		if k := fileKey(t, p); k.number() == old.number() {
			if k.Gen == 0 || k.Gen == old.Gen {
				t.Skipf("the filesystem of %s keeps no generation (%d, %d)", dir, old.Gen, k.Gen)
			}
			return k
		}
		if err := os.Rename(p, filepath.Join(dir, "aside"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	t.Skipf("the filesystem of %s gave no new file a deleted one's inode number in 200 tries", dir)
	return FileKey{}
}

// TestLocateTellsAReusedNumberByItsGeneration: a download's file deleted
// and its inode number given to a new file of the run (a retry's new
// ".incomplete", under the same name or another) is located as deleted,
// and the new file under its name, whatever the handle kept by number
// found.
func TestLocateTellsAReusedNumberByItsGeneration(t *testing.T) {
	for _, sameName := range []bool{false, true} {
		dir := t.TempDir()
		first := filepath.Join(dir, "model.incomplete")
		if err := os.WriteFile(first, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		old := fileKey(t, first)
		name := "retry.incomplete"
		if sameName {
			name = filepath.Base(first)
		}
		k := reuseNumber(t, old, first, dir, name)
		second := filepath.Join(dir, name)
		rows := []record.File{{Dev: old.Dev, Ino: old.Ino, Gen: old.Gen, Path: first}, {Dev: k.Dev, Ino: k.Ino, Gen: k.Gen, Path: second}}
		for _, final := range []map[FileKey]finalName{nil, {old.number(): {gone: true, first: first}}, {old.number(): {path: second, first: second}}} {
			locate := fileLocator(rows, nil, final)
			if l := locate(old); l != (Located{Path: first, Gone: true}) {
				t.Errorf("same name %v, handle %+v: the deleted file located %+v, want %s gone", sameName, final, l, first)
			}
			if l := locate(k); l != (Located{Path: second}) {
				t.Errorf("same name %v, handle %+v: the new file located %+v, want %s", sameName, final, l, second)
			}
		}
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
	if l := locate(key); l != (Located{Path: final, WrittenPath: tmp}) {
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

// TestKeptCopyInACache: pip receives a wheel into a temporary file and
// keeps the response, headers and all, in its HTTP cache: the cache's
// file holding the body, there at the end, is where the body was kept;
// one gone, one of another size, or one outside any cache is not.
func TestKeptCopyInACache(t *testing.T) {
	caches := []record.Cache{{Name: "pip", Root: "/h/.cache/pip"}}
	body := uint64(12<<20 + 300)
	entry := record.DownloadFile{Ino: 2, Path: "/h/.cache/pip/http/7/f/7/a/0/7f7a", BytesWritten: 12<<20 + 4096}
	d := record.Download{Path: "/tmp/pip-unpack-x/p-1.0-py3-none-any.whl", Bytes: body, Files: []record.DownloadFile{
		{Ino: 1, Path: "/tmp/pip-unpack-x/p-1.0-py3-none-any.whl", BytesWritten: 12<<20 + 4096, Gone: true},
		{Ino: 3, Path: "/h/.cache/pip/selfcheck/s.json", BytesWritten: 4096},
		entry,
		{Ino: 4, Path: "/tmp/target/p/blob.bin", BytesWritten: 12 << 20},
	}}
	if k := keptCopy(d, caches); k == nil || *k != entry {
		t.Errorf("kept copy %+v, want %+v", k, entry)
	}
	for name, f := range map[string]func(*record.DownloadFile){
		"gone":          func(f *record.DownloadFile) { f.Gone = true },
		"another size":  func(f *record.DownloadFile) { f.BytesWritten = 6 << 20 },
		"outside cache": func(f *record.DownloadFile) { f.Path = "/srv/copy" },
	} {
		e := entry
		f(&e)
		d.Files[2] = e
		if k := keptCopy(d, caches); k != nil {
			t.Errorf("%s: kept copy %+v, want none", name, k)
		}
	}
}
