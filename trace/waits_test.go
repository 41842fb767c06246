package trace

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/actor"
)

// TestWaitOutsideFillsNamesNoFile: dd writing with O_DIRECT|O_DSYNC waits
// for every write's I/O outside any page-cache fill. The scheduler once
// put such waits on the last file the thread read (a locale file, a
// library); now no file holds them, the files dd only hit wait nothing,
// and the attribution shows the time as I/O outside the page cache, which
// the warm estimate keeps.
func TestWaitOutsideFillsNamesNoFile(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs, which has no direct I/O; set TMPDIR to a disk-backed directory", dir)
	}
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(dir, "w.bin")
	rec, err := Run(ctx, Options{Command: []string{"dd", "if=/dev/zero", "of=" + out, "bs=64k", "count=64", "oflag=direct,dsync", "status=none"},
		NoGPU: true, NoJIT: true, Actor: self})
	if err != nil {
		t.Fatal(err)
	}
	if rec.ExitCode != 0 {
		t.Fatalf("dd exit %d", rec.ExitCode)
	}
	var threadIO, fileIO int64
	for _, th := range rec.Threads {
		threadIO += th.IOWaitNS
	}
	for _, f := range rec.Files {
		fileIO += f.IOWaitNS
		if f.PagesMissed == 0 && f.DirectBytes == 0 && f.IOWaitNS != 0 {
			t.Errorf("%s, no page of it read from disk, has %d ns of I/O wait", f.Path, f.IOWaitNS)
		}
		if f.DirectBytes != 0 {
			t.Errorf("%s: %d direct bytes read by a run that only wrote directly", f.Path, f.DirectBytes)
		}
	}
	if threadIO <= fileIO {
		t.Fatalf("threads waited %d ns for I/O, files hold %d ns: the 64 synchronous writes waited nowhere", threadIO, fileIO)
	}
	res := attribution.Analyze(rec)
	var outside int64
	if row := res.Row(attribution.DiskRead); row != nil {
		for _, fe := range row.Files {
			if fe.ID == attribution.OutsidePageCacheID {
				outside = fe.NS
				if fe.RecurringNS != fe.NS {
					t.Errorf("outside row: recurring %d ns of %d ns", fe.RecurringNS, fe.NS)
				}
			}
		}
	}
	if outside <= 0 || res.RecurringNS < outside || res.WarmEstimateNS < res.RecurringNS {
		t.Errorf("outside the page cache %d ns, recurring %d ns, warm estimate %d ns", outside, res.RecurringNS, res.WarmEstimateNS)
	}
}
