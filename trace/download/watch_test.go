package download

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
)

// TestUnlistedBodyIsNotSeen: a body no file shows was kept in memory only
// when its process's open files were listed while it arrived; otherwise a
// tmpfs file written and closed between two listings may hold it, and the
// destination was not seen.
func TestUnlistedBodyIsNotSeen(t *testing.T) {
	c := part(1, 10, 100, 160, 8*mib)
	var l listings
	for _, tc := range []struct {
		name   string
		listed []int64 // listing times of pid 10, ms
		want   string
	}{
		{"never listed", nil, record.DestNotSeen},
		{"listed before only", []int64{50}, record.DestNotSeen},
		{"listed after only", []int64{400}, record.DestNotSeen},
		{"listed while receiving", []int64{130}, record.DestMemory},
		{"span across the download", []int64{90, 95, 100, 105}, record.DestMemory},
	} {
		l = listings{}
		for _, at := range tc.listed {
			l.add(10, at*ms)
		}
		got := Build([]Conn{c}, nil, Env{IntervalNS: 100 * ms, Listed: l.during})
		if len(got) != 1 || got[0].Destination != tc.want || got[0].Unlisted != (tc.want == record.DestNotSeen) {
			t.Errorf("%s: got %+v, want one download, destination %q, unlisted when not seen", tc.name, got, tc.want)
		}
	}
}

// TestListingsMergeCloseTicks: listings a few ticks apart make one span;
// a gap makes another, and a time inside the gap is not listed.
func TestListingsMergeCloseTicks(t *testing.T) {
	l := listings{}
	for _, at := range []int64{0, 5, 10, 15, 200, 205} {
		l.add(7, at*ms)
	}
	if len(l[7]) != 2 {
		t.Fatalf("spans %v, want 2", l[7])
	}
	if !l.during(7, 12*ms, 13*ms) || l.during(7, 50*ms, 150*ms) || !l.during(7, 150*ms, 201*ms) || l.during(8, 0, 300*ms) {
		t.Errorf("spans %v answer wrongly", l[7])
	}
}

// TestTmpfsDownloadBetweenTwoPollsIsFound: a 16 MiB download into /dev/shm
// under a temporary name, renamed into place, that starts after one poll
// and is over (file closed and renamed) before the next: the watcher
// lists the receiving process's files while it receives, so the record
// names the final file, byte-exact, with its tmpfs row.
func TestTmpfsDownloadBetweenTwoPollsIsFound(t *testing.T) {
	testenv.RequireTracing(t)
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Skip("needs /dev/shm on tmpfs")
	}
	dir, err := os.MkdirTemp("/dev/shm", "coldtrace-watch-test-")
	if err != nil {
		t.Skipf("/dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dest := filepath.Join(dir, "model\xff.bin")
	srv := serve(t)
	s, shared := startSensor(t)
	start := monotonicNS()
	s.Begin(start)
	if err := s.Poll(monotonicNS(), nil); err != nil {
		t.Fatal(err)
	}
	results, _ := runClient(t, shared, "get:"+srv.URL+"/short:"+dest)
	if err := s.Poll(monotonicNS(), nil); err != nil {
		t.Fatal(err)
	}
	got := results.ops["get"]
	if len(got) != 1 || got[0].Bytes != memBody {
		t.Fatalf("client results %+v, want one get of %d bytes", results.ops, memBody)
	}
	t.Logf("download took %v", time.Duration(got[0].T1-got[0].T0))
	// The two polls bound the download: one interval holds it.
	rec := &record.Record{IntervalNS: int64(monotonicNS() - start)}
	if err := s.Finish(rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Downloads) != 1 {
		t.Fatalf("downloads %+v, want one", rec.Downloads)
	}
	d := rec.Downloads[0]
	if d.Destination != record.DestFile || d.Path != dest {
		t.Fatalf("destination %q at %q, want %q at %q (candidates %+v)", d.Destination, d.Path, record.DestFile, dest, d.Candidates)
	}
	k := fileKey(t, dest)
	dev, ino := k.Dev, k.Ino
	var row *record.File
	for i := range rec.Files {
		if rec.Files[i].Dev == dev && rec.Files[i].Ino == ino {
			row = &rec.Files[i]
		}
	}
	if row == nil || row.Path != dest || row.FirstPath != dest+".incomplete" || row.SizeBytes != memBody || row.FS != "tmpfs" ||
		row.PagesCreated != memBody/4096 {
		t.Errorf("files[] row %+v, want %q (first %q), %d bytes, %d pages created, on tmpfs", row, dest, dest+".incomplete", memBody, memBody/4096)
	}
}

// The watcher ticks only while a tracked connection is open: the
// kernel's count of them is 0 before the run's first connection (the
// watcher then waits for the kernel's note that one opened) and again
// once the download's connection has closed.
func TestWatcherWaitsWhileNoConnectionIsOpen(t *testing.T) {
	testenv.RequireTracing(t)
	srv := serve(t)
	s, shared := startSensor(t)
	s.Begin(monotonicNS())
	if got := s.idleWait(); got != 0 {
		t.Errorf("before any connection: the watcher's idle wait is %v, want 0 (until one opens)", got)
	}
	dest := filepath.Join(t.TempDir(), "body.bin")
	results, _ := runClient(t, shared, "get:"+srv.URL+"/short:"+dest)
	if got := results.ops["get"]; len(got) != 1 || got[0].Bytes != memBody {
		t.Fatalf("client results %+v, want one get of %d bytes", results.ops, memBody)
	}
	// The client has exited; its socket's last transition to CLOSE may
	// come a moment after (the peer's ACK of its FIN).
	var open int64
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := s.objs.OpenConns.Lookup(uint32(0), &open); err != nil {
			t.Fatal(err)
		}
		if open == 0 || time.Now().After(deadline) {
			break
		}
	}
	if open != 0 || s.idleWait() != 0 {
		t.Errorf("after the client's connection closed: %d open, idle wait %v; want 0 and 0", open, s.idleWait())
	}
}
