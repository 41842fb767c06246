package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/pagecache"
)

// TestSmallCachedFiles reads 300 small files twice: warm, their pages are
// counted in the one small-files row and none has a row of its own; cold,
// each has its own row with every page missed. The ground truth is the
// files' sizes (page multiples, so no read past the end counts twice) and
// mincore.
func TestSmallCachedFiles(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs: its pages cannot be evicted; set TMPDIR to a disk-backed directory", dir)
	}
	const n = 300
	var paths []string
	var pages uint64
	for i := 0; i < n; i++ {
		size := 4096 * (1 + i%8) // 4–32 KiB
		p := filepath.Join(dir, fmt.Sprintf("m%03d.py", i))
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(i + j)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		pages += uint64(size / 4096)
	}
	unix.Sync() // dirty pages cannot be evicted
	// Static, so the only files it reads are these, each read 5 times:
	// the small-files row must hold 5× their pages, plus what the gated
	// launch's loader reads while the first thread is being seeded (25–80
	// pages here), so at most 2% more.
	reader := buildC(t, "readfiles", "-static")
	out := filepath.Join(t.TempDir(), "s.json")
	const reads = 5
	args := []string{"-q", "--json", out, "--", reader}
	for i := 0; i < reads; i++ {
		args = append(args, paths...)
	}

	resident := func() (total int) {
		for _, p := range paths {
			total += e2eutil.ResidentPages(t, p)
		}
		return total
	}
	for try := 1; ; try++ {
		for _, p := range paths {
			e2eutil.WarmUp(t, p)
		}
		code, _, stderr := coldtrace(t, nil, args...)
		if code != 0 {
			t.Fatalf("warm run exit %d: %s", code, stderr)
		}
		s := readSummary(t, out)
		var small uint64
		own := 0
		for _, f := range s.Files {
			if f.Path == pagecache.SmallFilesPath {
				small = f.PagesAccessed
			}
			if filepath.Dir(f.Path) == dir {
				own++
			}
		}
		want := reads * pages
		t.Logf("warm (try %d): small-files row %d pages (%d reads of files holding %d), %d files with rows", try, small, reads, pages, own)
		if small >= want && small-want <= want/50 && own == 0 && s.LostEvents == 0 {
			break
		}
		// DAMON may page a file out between the warm-up and the run; a
		// file that missed rightly gets its own row. One more try.
		if try == 2 {
			t.Fatalf("warm: small-files row %d pages, want %d to %d; %d files have their own row, want 0", small, want, want+want/50, own)
		}
	}

	for _, p := range paths {
		e2eutil.Evict(t, p)
	}
	if r := resident(); r > int(pages)/100 {
		t.Fatalf("after eviction %d pages are still cached", r)
	}
	// A page read in and taken back by the machine before the next of
	// its five reads misses again, rightly (seen beside a busy loop: 44
	// of 1,342 pages): misses past the files' pages are bounded by the
	// file pages reclaimed meanwhile.
	reclaimed := testenv.FileReclaim(t)
	code, _, stderr := coldtrace(t, nil, args...)
	if code != 0 {
		t.Fatalf("cold run exit %d: %s", code, stderr)
	}
	again := reclaimed()
	s := readSummary(t, out)
	var missed, accessed uint64
	own := 0
	for _, f := range s.Files {
		if filepath.Dir(f.Path) == dir {
			own++
			missed += f.PagesMissed
			accessed += f.PagesAccessed
		}
	}
	t.Logf("cold: %d files with rows, %d pages missed, %d accessed (files hold %d; %d file pages reclaimed meanwhile)", own, missed, accessed, pages, again)
	if own != n || missed < pages || missed > pages+again || accessed != reads*pages {
		t.Errorf("cold: %d files with rows (want %d), %d pages missed (want %d, up to %d more reclaimed meanwhile), %d accessed (want %d)",
			own, n, missed, pages, again, accessed, reads*pages)
	}
	if s.LostEvents != 0 {
		t.Errorf("cold: %d lost events", s.LostEvents)
	}
}

// TestWritesCreatePages writes a new 8 MiB file: its pages are created,
// not missed (the syscall is told from the thread's saved registers),
// and no time is charged to disk reads for them.
func TestWritesCreatePages(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "new.bin")
	rec := filepath.Join(t.TempDir(), "r.json.gz")
	code, _, stderr := coldtrace(t, nil, "-q", "-o", rec, "--", "dd", "if=/dev/zero", "of="+path, "bs=1M", "count=8", "status=none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := readRecord(t, rec)
	for _, f := range r.Files {
		if f.Path != path {
			continue
		}
		t.Logf("%s: created %d, missed %d, fill CPU %d ns", f.Path, f.PagesCreated, f.PagesMissed, f.MissCPUNS)
		if f.PagesCreated != 2048 || f.PagesMissed != 0 || f.MissCPUNS != 0 {
			t.Errorf("created %d pages, missed %d, fill CPU %d ns; want 2048 created, nothing missed or charged", f.PagesCreated, f.PagesMissed, f.MissCPUNS)
		}
		return
	}
	t.Fatalf("no row for %s", path)
}

func readRecord(t *testing.T, path string) *record.Record {
	t.Helper()
	r, err := record.ReadFile(path)
	if err != nil {
		t.Fatalf("read record %s: %v", path, err)
	}
	return r
}
