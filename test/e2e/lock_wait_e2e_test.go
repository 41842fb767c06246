package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
)

// TestWaitOnAPageLockedByAnotherIsNoDiskRead: a traced program faults in
// pages of a cached file again and again while an untraced writer
// overwrites them; a fault that finds its page's folio locked by the
// writer waits in I/O wait, yet nothing of the file is read from disk.
// The wait is the run's (I/O outside the page cache), not the file's,
// and the verdict does not call it a wait for the file being read in.
func TestWaitOnAPageLockedByAnotherIsNoDiskRead(t *testing.T) {
	requireTracing(t)
	reader, writer := buildC(t, "refault_locked"), buildC(t, "overwrite_pages")
	f := filepath.Join(e2eutil.DiskDir(t), "overwritten.bin")
	if err := os.WriteFile(f, bytes.Repeat([]byte{'r'}, 64<<12), 0o644); err != nil {
		t.Fatal(err)
	}
	w := exec.Command(writer, f)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.Process.Kill()
		_ = w.Wait()
	})
	var run waitsRun
	var waited int64
	for try := 1; try <= 3 && waited == 0; try++ {
		run = traceWaits(t, reader, f, "1500")
		for _, p := range run.rec.Processes {
			waited += p.IOWaitNS
		}
	}
	if waited == 0 {
		t.Fatal("no fault of the reader waited in I/O in three runs: the writer never held a page the reader faulted on, so this run shows nothing")
	}
	got := run.file(t, f)
	if got.PagesMissed != 0 || got.PagesShared != 0 {
		t.Fatalf("%s: %d pages missed, %d shared: the file was cached throughout", f, got.PagesMissed, got.PagesShared)
	}
	if got.IOWaitNS != 0 {
		t.Errorf("%s: %d ns of the run's %d ns of I/O wait charged to a file nothing was read of", f, got.IOWaitNS, waited)
	}
	checkHitsWaitNothing(t, run)
	if strings.Contains(run.summary.Verdict, "already being read in") {
		t.Errorf("verdict %q: no file was being read in", run.summary.Verdict)
	}
	if waited*10 >= run.rec.WallNS && !strings.Contains(run.summary.Verdict, "I/O outside the page cache, which a rerun repeats") {
		t.Errorf("verdict %q does not name the %d ns of a %d ns run waited in I/O", run.summary.Verdict, waited, run.rec.WallNS)
	}
	t.Logf("reader waited %d ns in I/O; verdict %q", waited, run.summary.Verdict)
}
