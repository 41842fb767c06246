package e2e

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
)

// TestUringReadsCountEachPageOnce: io_uring reads of a file count each
// page they access once, however the requests are spread over threads,
// sized, vectored, placed (offsets, or the file's position) or given
// their file. No read syscall separates one
// request from the next in the thread that does it (the submitter's
// inline attempt, a retry from task work, an io-wq worker), so each
// request is known from its submission: its first traced batch counts
// from its own start. Taken for later batches of one read, a request
// past a gap counted the gap too (two workers taking turns on 1 MiB
// chunks counted each other's chunks, a reader that skips chunks the
// skipped ones); counted from its first traced batch, a request whose
// first batch went untraced (a cold batch whose last folio is still
// being read) left those pages out: 106 of 24,576 in 132 KiB requests.
// Half of every MiB is cached before some runs, so the submitter's
// nonblocking attempts stop short and the rest is read by a retry; the
// file is wholly evicted before the others; chunks of 132 and 20 KiB
// start inside readahead windows (cold, 2,023 of 2,048 pages were
// counted before requests were known from their submission).
func TestUringReadsCountEachPageOnce(t *testing.T) {
	requireTracing(t)
	reader := buildC(t, "uring_async_read")
	const size = 8 << 20
	for _, c := range []struct {
		mode        string
		chunk, step int
		cold        bool
	}{
		{"async", 64 << 10, 1, false},
		{"inline", 64 << 10, 2, false},
		{"inline", 132 << 10, 1, true},
		{"async", 132 << 10, 1, true},
		{"async+readv", 132 << 10, 2, false},
		{"inline+fixed", 132 << 10, 1, true},
		{"async+readv+fixed", 20 << 10, 3, false},
		{"inline+curpos", 132 << 10, 1, true},
		{"async+readv+curpos", 20 << 10, 2, false},
	} {
		f := e2eutil.EvictableFile(t, size)
		if !c.cold {
			cacheHalves(t, f, size)
		}
		w := traceWaits(t, reader, f, strconv.Itoa(c.chunk), c.mode, strconv.Itoa(c.step))
		got := w.file(t, f)
		want := chunkPages(size, c.chunk, c.step)
		t.Logf("%s, %d-byte chunks, one in %d, cold %v: %d pages accessed (want %d), %d missed", c.mode, c.chunk, c.step, c.cold, got.PagesAccessed, want, got.PagesMissed)
		if got.PagesAccessed != want {
			t.Errorf("%s, %d-byte chunks, one in %d: %s: %d pages accessed, want %d (each page a request reads, once)", c.mode, c.chunk, c.step, f, got.PagesAccessed, want)
		}
	}
}

// chunkPages is how many pages of a size-byte file a reader of one
// chunk-byte chunk in every step touches, counted once per chunk.
func chunkPages(size, chunk, step int) uint64 {
	page := os.Getpagesize()
	var n uint64
	for off := 0; off < size; off += chunk * step {
		end := min(off+chunk, size)
		n += uint64((end-1)/page - off/page + 1)
	}
	return n
}

// cacheHalves leaves the first half of every MiB of path in the page
// cache and the second evicted (reading only the first halves would read
// ahead into the second).
func cacheHalves(t *testing.T, path string, size int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) != size {
		t.Fatalf("cache %s: %d bytes, %v", path, len(b), err)
	}
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	for off := int64(512 << 10); off < int64(size); off += 1 << 20 {
		if err := unix.Fadvise(int(fd.Fd()), off, 512<<10, unix.FADV_DONTNEED); err != nil {
			t.Fatalf("evict %s at %d: %v", path, off, err)
		}
	}
}
