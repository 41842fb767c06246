package download

import (
	"os"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
)

// TestTmpfsSizesFollowWrites: a file on tmpfs this process has open is
// kept once seen, its growth read poll by poll as the pages it fills
// (a write far past the end counts one page, not the hole before it),
// and still read after it was closed and renamed. A file that was there
// before the run counts only its growth.
func TestTmpfsSizesFollowWrites(t *testing.T) {
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "coldtrace-tmpfs-test-")
	if err != nil {
		t.Skipf("/dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(dir + "/a.incomplete")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 3<<12)); err != nil {
		t.Fatal(err)
	}
	// the run began run ns ago: the file was born in it
	const run = 10_000_000_000
	clock := int64(run)
	ts, names := newTmpfsSizes(func() int64 { return clock }), map[FileKey]string{}
	defer ts.close()
	ts.watch(int32(os.Getpid()), names)
	if _, err := f.WriteAt([]byte{1}, 1<<30); err != nil { // one page, 1 GiB on
		t.Fatal(err)
	}
	clock = run + 100
	ts.poll()
	if _, err := f.WriteAt(make([]byte, 2<<12), 3<<12); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Rename(dir+"/a.incomplete", dir+"/a"); err != nil {
		t.Fatal(err)
	}
	clock = run + 200
	ts.poll()
	w := ts.written()
	if len(w) != 1 {
		t.Fatalf("%d files polled, want 1: %+v", len(w), w)
	}
	want := []point{{run, 3 << 12}, {run + 100, 1 << 12}, {run + 200, 2 << 12}}
	if len(w[0].Points) != len(want) {
		t.Fatalf("points %+v, want %+v", w[0].Points, want)
	}
	for i, p := range want {
		if w[0].Points[i] != p {
			t.Errorf("point %d: %+v, want %+v", i, w[0].Points[i], p)
		}
	}
	if names[w[0].Key] != dir+"/a.incomplete" {
		t.Errorf("named %q, want %s/a.incomplete", names[w[0].Key], dir)
	}
	old, err := os.OpenFile(dir+"/a", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	clock = 1 // the run began 1 ns ago
	fresh := newTmpfsSizes(func() int64 { return clock })
	defer fresh.close()
	fresh.watch(int32(os.Getpid()), map[FileKey]string{})
	if _, err := old.WriteAt(make([]byte, 1<<12), 5<<12); err != nil {
		t.Fatal(err)
	}
	clock = 2
	fresh.poll()
	if got := fresh.written(); len(got) != 1 || len(got[0].Points) != 1 || got[0].Points[0] != (point{2, 1 << 12}) {
		t.Errorf("a file older than the run: %+v, want its one page of growth", got)
	}
}

// TestTmpfsDestinationGetsFileRow: a download's file that only the polls
// measured gets its files[] row (its index as ID, the pages created, its
// size, its final and first names byte for byte, nothing from disk); a
// file the page-cache sensor already has a row for, or one never
// polled, gets none.
func TestTmpfsDestinationGetsFileRow(t *testing.T) {
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "coldtrace-tmpfs-test-")
	if err != nil {
		t.Skipf("/dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	written := dir + "/blob\xff.incomplete"
	f, err := os.Create(written)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	clock := int64(1)
	ts := newTmpfsSizes(func() int64 { return clock })
	defer ts.close()
	ts.watch(int32(os.Getpid()), map[FileKey]string{})
	if _, err := f.Write(make([]byte, 5<<12+10)); err != nil {
		t.Fatal(err)
	}
	clock = 2
	ts.poll()
	w := ts.written()
	if len(w) != 1 {
		t.Fatalf("%d files polled, want 1", len(w))
	}
	k := w[0].Key
	final := dir + "/blob\xff"
	rec := &record.Record{
		Files: []record.File{{ID: 0, Dev: 1, Ino: 2, Path: "/x", PagesCreated: 3}},
		Downloads: []record.Download{{Path: final, Files: []record.DownloadFile{
			{Dev: k.Dev, Ino: k.Ino, Path: final, WrittenPath: written, BytesWritten: 6 << 12},
			{Dev: 1, Ino: 2, Path: "/x"},
			{Dev: 9, Ino: 9, Path: "/never-polled"},
		}}},
	}
	ts.fileRows(rec, 4096)
	ts.fileRows(rec, 4096) // twice: still one row
	if len(rec.Files) != 2 {
		t.Fatalf("files %+v, want the page cache's row and one for the tmpfs file", rec.Files)
	}
	want := record.File{ID: 1, Dev: k.Dev, Ino: k.Ino, Path: final, FirstPath: written, SizeBytes: 5<<12 + 10, PagesCreated: 6, FS: "tmpfs"}
	if got := rec.Files[1]; !reflect.DeepEqual(got, want) {
		t.Errorf("row %+v, want %+v", got, want)
	}
}
