package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/pagecache"
)

// waitsRun is one traced run's record and the summary fields these tests
// read.
type waitsRun struct {
	rec     *record.Record
	summary struct {
		Cold           bool   `json:"cold"`
		Verdict        string `json:"verdict"`
		WarmEstimateNS int64  `json:"warm_estimate_ns"`
		RecurringNS    int64  `json:"recurring_ns"`
		Files          []struct {
			Path         string `json:"path"`
			DirectBytes  uint64 `json:"direct_bytes"`
			DirectWaitNS int64  `json:"direct_wait_ns"`
		} `json:"files"`
	}
}

// traceWaits runs command under coldtrace with a record and a summary.
func traceWaits(t *testing.T, command ...string) waitsRun {
	t.Helper()
	dir := t.TempDir()
	rec, sum := filepath.Join(dir, "run.ctrace"), filepath.Join(dir, "run.json")
	code, _, stderr := coldtrace(t, nil, append([]string{"-q", "-o", rec, "--json", sum, "--"}, command...)...)
	if code != 0 {
		t.Fatalf("coldtrace %v: exit %d: %s", command, code, stderr)
	}
	var w waitsRun
	r, err := record.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	w.rec = r
	readSummary(t, sum) // validates the schema
	b, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &w.summary); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w waitsRun) file(t *testing.T, path string) record.File {
	t.Helper()
	for _, f := range w.rec.Files {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("%s not among the record's %d files", path, len(w.rec.Files))
	return record.File{}
}

// missed says whether the run read any page of any file from disk, or
// waited on pages of one being read in: a run meant to read only through
// direct I/O is retried when the page cache lost a library or the binary
// between runs (DAMON pages idle files out here).
func (w waitsRun) missed() bool {
	for _, f := range w.rec.Files {
		if f.PagesMissed > 0 || f.PagesShared > 0 || f.FillWaitNS > 0 || f.IOWaitNS > f.DirectWaitNS {
			return true
		}
	}
	return false
}

// directFile writes size bytes to a file in a disk-backed directory.
func directFile(t *testing.T, dir, name string, size int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*131 + len(name) + i>>12)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkHitsWaitNothing: no file the run only hit in the page cache has an
// I/O wait (the scheduler once charged a thread's every wait to the last
// file it read, a locale file under dd; later a fault's wait on a folio
// someone else had locked to the file it faulted on). Pages shared with
// an untraced reader came from disk through it: their waits are I/O.
func checkHitsWaitNothing(t *testing.T, w waitsRun) {
	t.Helper()
	for _, f := range w.rec.Files {
		if f.PagesMissed > 0 || f.PagesShared > 0 || f.DirectBytes > 0 || f.PagesCreated > 0 || strings.HasPrefix(f.Path, "[") {
			continue
		}
		if f.IOWaitNS != 0 {
			t.Errorf("%s, all cache hits, has %d ns of I/O wait", f.Path, f.IOWaitNS)
		}
	}
}

// checkDirectFile: the file's direct bytes are its size, none of it went
// through the page cache, and its waits are bounded by the wall.
func checkDirectFile(t *testing.T, w waitsRun, path string, size uint64) {
	t.Helper()
	f := w.file(t, path)
	if f.DirectBytes != size {
		t.Errorf("%s: direct bytes %d, want %d", path, f.DirectBytes, size)
	}
	if f.PagesMissed != 0 || f.BytesFromDisk != 0 {
		t.Errorf("%s: %d pages missed, %d bytes from disk: direct reads fill no page cache", path, f.PagesMissed, f.BytesFromDisk)
	}
	if f.DirectWaitNS <= 0 || f.DirectWaitNS > f.IOWaitNS || f.IOWaitNS > w.rec.WallNS*4 {
		t.Errorf("%s: direct wait %d ns, I/O wait %d ns, wall %d ns", path, f.DirectWaitNS, f.IOWaitNS, w.rec.WallNS)
	}
}

// checkRecurring: a run whose disk time is direct I/O is no cold start,
// and its warm estimate keeps that time.
func checkRecurring(t *testing.T, w waitsRun) {
	t.Helper()
	s := w.summary
	if s.Cold || strings.Contains(s.Verdict, "cold start") || strings.Contains(s.Verdict, "not in page cache") {
		t.Errorf("cold = %v, verdict %q: direct reads are paid again by a rerun", s.Cold, s.Verdict)
	}
	if s.RecurringNS <= 0 || s.RecurringNS > w.rec.WallNS {
		t.Errorf("recurring %d ns of a %d ns run", s.RecurringNS, w.rec.WallNS)
	}
	if s.WarmEstimateNS < s.RecurringNS {
		t.Errorf("warm estimate %d ns promises away recurring %d ns", s.WarmEstimateNS, s.RecurringNS)
	}
	if s.RecurringNS*10 >= w.rec.WallNS && !strings.Contains(s.Verdict, "direct I/O of") {
		t.Errorf("verdict %q does not name the direct reads, %d ns of a %d ns run", s.Verdict, s.RecurringNS, w.rec.WallNS)
	}
}

// TestDirectReadChargedToItsFile: dd iflag=direct's wait lands on the file
// it reads, as direct I/O of exactly its size; the files it only hit get
// no wait, and the run is not called cold.
func TestDirectReadChargedToItsFile(t *testing.T) {
	requireTracing(t)
	const size = 8 << 20
	f := directFile(t, e2eutil.DiskDir(t), "direct.bin", size)
	dd := []string{"dd", "if=" + f, "of=/dev/null", "iflag=direct", "bs=1M"}
	var w waitsRun
	for try := 1; ; try++ {
		if b, err := exec.Command(dd[0], dd[1:]...).CombinedOutput(); err != nil { // loads dd's libraries
			t.Fatalf("dd: %v\n%s", err, b)
		}
		w = traceWaits(t, dd...)
		if !w.missed() || try == 3 {
			t.Logf("run %d: missed or waited on a cached file: %v", try, w.missed())
			break
		}
	}
	checkDirectFile(t, w, f, size)
	checkHitsWaitNothing(t, w)
	if !w.missed() {
		checkRecurring(t, w)
	}
	var listed bool
	for _, sf := range w.summary.Files {
		listed = listed || (sf.Path == f && sf.DirectBytes == size)
	}
	if !listed {
		t.Errorf("summary files do not list %s with %d direct bytes", f, size)
	}
}

// directReader reads each file named on its command line in a thread of
// its own with O_DIRECT, preadv into page-aligned mmap buffers.
const directReader = `
import mmap, os, sys, threading
def read(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 1 << 20)
    off = 0
    while True:
        n = os.preadv(fd, [buf], off)
        if n <= 0:
            break
        off += n
    os.close(fd)
ts = [threading.Thread(target=read, args=(p,)) for p in sys.argv[1:]]
for t in ts: t.start()
for t in ts: t.join()
`

// TestDirectReadsOfFourThreads: four Python threads read four files with
// O_DIRECT at once; each file's direct bytes are its size.
func TestDirectReadsOfFourThreads(t *testing.T) {
	requireTracing(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := e2eutil.DiskDir(t)
	sizes := []int{2 << 20, 3 << 20, 5 << 20, 6 << 20}
	var files []string
	for i, n := range sizes {
		files = append(files, directFile(t, dir, fmt.Sprintf("shard%d.bin", i), n))
	}
	w := traceWaits(t, append([]string{py, "-c", directReader}, files...)...)
	for i, f := range files {
		checkDirectFile(t, w, f, uint64(sizes[i]))
	}
	checkHitsWaitNothing(t, w)
}

// TestAsyncUringReadIsTracked: a file read through io_uring with
// IOSQE_ASYNC is read by an io-wq worker, which joins the trace: every
// page of the evicted file is a miss of that file, its wait is that
// file's fill, and the libraries the submitter last read wait nothing.
func TestAsyncUringReadIsTracked(t *testing.T) {
	requireTracing(t)
	reader := buildC(t, "uring_async_read")
	const size = 8 << 20
	f := e2eutil.EvictableFile(t, size)
	w := traceWaits(t, reader, f)
	got := w.file(t, f)
	if pages := uint64(size / os.Getpagesize()); got.PagesMissed != pages {
		t.Errorf("%s: %d pages missed, want %d (the io-wq worker read them)", f, got.PagesMissed, pages)
	}
	if got.IOWaitNS+got.MissCPUNS <= 0 || got.IOWaitNS > w.rec.WallNS*4 {
		t.Errorf("%s: I/O wait %d ns, fill CPU %d ns in a %d ns run", f, got.IOWaitNS, got.MissCPUNS, w.rec.WallNS)
	}
	if got.DirectBytes != 0 {
		t.Errorf("%s: %d direct bytes from a buffered read", f, got.DirectBytes)
	}
	checkHitsWaitNothing(t, w)
	// The reader has one thread of its own: any other did the reads for
	// it, an io-wq worker.
	var workerFill int64
	for _, th := range w.rec.Threads {
		if th.TID != th.PID {
			workerFill += th.MissCPUNS
		}
	}
	if workerFill <= 0 {
		t.Errorf("no thread besides the reader's own filled the page cache: %+v", w.rec.Threads)
	}
}

// loopDevice attaches a loop device to a size-byte image and returns its
// path, detached at the end of t.
func loopDevice(t *testing.T, size int) string {
	t.Helper()
	img := directFile(t, e2eutil.DiskDir(t), "disk.img", size)
	out, err := exec.Command("losetup", "-f", "--show", img).Output()
	if err != nil {
		t.Skipf("no loop device to read a block device directly: losetup: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// TestDirectReadOfBlockDevice: a block device read with O_DIRECT (no
// iomap request on its bios) is named by the read's descriptor: the
// device, with exactly the bytes read.
func TestDirectReadOfBlockDevice(t *testing.T) {
	requireTracing(t)
	const size = 4 << 20
	dev := loopDevice(t, size)
	w := traceWaits(t, "dd", "if="+dev, "of=/dev/null", "iflag=direct", "bs=1M")
	got := w.file(t, dev)
	if got.DirectBytes != size || got.DirectWaitNS > got.IOWaitNS {
		t.Errorf("%s: direct bytes %d (want %d), direct wait %d ns of I/O wait %d ns", dev, got.DirectBytes, size, got.DirectWaitNS, got.IOWaitNS)
	}
	checkHitsWaitNothing(t, w)
}

// TestAsyncUringDirectRead: an O_DIRECT file read through io_uring with
// IOSQE_ASYNC: a worker queues the reads, which complete asynchronously
// while the submitter waits; the bytes are the file's, as direct I/O, and
// the submitter's wait goes to no other file.
func TestAsyncUringDirectRead(t *testing.T) {
	requireTracing(t)
	reader := buildC(t, "uring_async_read")
	const size = 8 << 20
	f := directFile(t, e2eutil.DiskDir(t), "direct.bin", size)
	w := traceWaits(t, reader, f, "1048576", "direct")
	got := w.file(t, f)
	if got.DirectBytes != size || got.PagesMissed != 0 {
		t.Errorf("%s: direct bytes %d (want %d), %d pages missed", f, got.DirectBytes, size, got.PagesMissed)
	}
	if got.DirectWaitNS > got.IOWaitNS || got.IOWaitNS > w.rec.WallNS*4 {
		t.Errorf("%s: direct wait %d ns, I/O wait %d ns, wall %d ns", f, got.DirectWaitNS, got.IOWaitNS, w.rec.WallNS)
	}
	checkHitsWaitNothing(t, w)
}

// TestDirectReadFileUnknown: io_uring's asynchronous O_DIRECT reads of a
// raw block device carry no request the bio names a file by, and no read
// syscall queues them: they are shown per process and device as direct
// I/O of an unknown file, with exactly the bytes read, and the device's
// own row gets none.
func TestDirectReadFileUnknown(t *testing.T) {
	requireTracing(t)
	reader := buildC(t, "uring_async_read")
	const size = 4 << 20
	dev := loopDevice(t, size)
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	w := traceWaits(t, reader, dev, "1048576", "direct")
	if len(w.rec.Processes) != 1 {
		t.Fatalf("%d processes, want the reader alone: %+v", len(w.rec.Processes), w.rec.Processes)
	}
	want := fmt.Sprintf(pagecache.DirectUnknownFormat, w.rec.Processes[0].PID, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	got := w.file(t, want)
	if got.DirectBytes != size || got.PagesMissed != 0 || got.DirectWaitNS > got.IOWaitNS {
		t.Errorf("%s: direct bytes %d (want %d), %d pages missed, direct wait %d ns of I/O wait %d ns",
			want, got.DirectBytes, size, got.PagesMissed, got.DirectWaitNS, got.IOWaitNS)
	}
	for _, f := range w.rec.Files {
		if f.Path == dev && f.DirectBytes != 0 {
			t.Errorf("%s: %d direct bytes named by a file the bios do not name", dev, f.DirectBytes)
		}
	}
	checkHitsWaitNothing(t, w)
}
