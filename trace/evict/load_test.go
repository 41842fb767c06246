package evict

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/sched"
)

// TestEvictionByThisProcess: the probes load with the scheduler's maps;
// a file with an entry in the files table that this (untraced) process
// evicts with fadvise is counted, with this process as the evictor.
// A checkpoint (Snapshot) holds it too.
func TestEvictionByThisProcess(t *testing.T) {
	testenv.RequireTracing(t)
	sc, err := sched.New(sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s, err := New(Options{Shared: sc.Shared().Replacements(), Traced: func(int32) bool { return false }})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer s.Close()

	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs: pages cannot be evicted")
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var fst unix.Stat_t
	if err := unix.Stat(path, &fst); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		t.Fatal(err)
	}
	// The files table's key: the superblock's s_dev in the kernel's encoding.
	dev := uint32(unix.Major(fst.Dev))<<20 | uint32(unix.Minor(fst.Dev))
	// With the inode's generation, which ext4, xfs and btrfs give.
	gen, err := probe.InodeGeneration(fd)
	if err != nil {
		t.Skipf("the filesystem of %s gives no inode generation: %v", dir, err)
	}
	key := probe.FileKey{Dev: dev, Ino: fst.Ino, Gen: gen}
	if err := sc.Shared().Files.Put(struct {
		Dev, Gen uint32
		Ino      uint64
	}{key.Dev, key.Gen, key.Ino}, make([]byte, sc.Shared().Files.ValueSize())); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	rec := &record.Record{Files: []record.File{{Dev: key.Dev, Ino: key.Ino, Gen: key.Gen}}}
	if err := s.Poll(0, nil); err != nil {
		t.Fatal(err)
	}
	// A checkpoint holds the evictors as of the last poll, and the end
	// of the run still has them.
	ckpt := &record.Record{Files: []record.File{{Dev: key.Dev, Ino: key.Ino, Gen: key.Gen}}}
	if err := s.Snapshot(ckpt); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(rec); err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]*record.Record{"record": rec, "checkpoint": ckpt} {
		evs := r.Files[0].Evictors
		if len(evs) != 1 || evs[0].PID != int32(os.Getpid()) || evs[0].Kind != record.EvictSyscall || evs[0].Syscall != "fadvise64" || evs[0].Pages != 256 {
			t.Errorf("%s: evictors %+v, want 256 pages by pid %d's fadvise64", what, evs, os.Getpid())
		}
	}
}
