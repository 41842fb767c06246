package residency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Range is a byte range of a file.
type Range struct {
	Off int64 `json:"off"`
	Len int64 `json:"len"`
}

// Planned is one file of a prefetch plan.
type Planned struct {
	Path string `json:"path"`
	Size int64  `json:"size_bytes"`
	// Known is false when the kernel would not say what is cached
	// (Unknown says why): the whole file is then read, which costs only
	// a copy for the pages that were cached after all.
	Known        bool    `json:"known"`
	Unknown      string  `json:"unknown,omitempty"`
	CachedBytes  int64   `json:"cached_bytes"`
	MissingBytes int64   `json:"missing_bytes"`
	Missing      []Range `json:"missing"`
}

// Plan is what Prefetch would read, file by file, in order.
type Plan struct {
	Files        []Planned `json:"files"`
	TotalBytes   int64     `json:"total_bytes"`
	MissingBytes int64     `json:"missing_bytes"`
}

// PlanPrefetch finds, for paths in order (directories recursively), the
// ranges not in the page cache. The ranges come from mincore(2) on a
// mapping of each file, used only where cachestat answered: both are
// truthful under the same permission, and mincore gives the exact pages.
func PlanPrefetch(a Actor, paths []string) (Plan, []Problem) {
	files, probs := eachFile(a, paths, planOne)
	plan := Plan{Files: files}
	for _, pf := range files {
		plan.TotalBytes += pf.Size
		plan.MissingBytes += pf.MissingBytes
	}
	return plan, probs
}

func planOne(fh *os.File, t target) (Planned, error) {
	pf := Planned{Path: t.path, Size: t.size}
	c, unknown, err := cachestatFile(fh)
	if err != nil {
		return pf, err
	}
	pf.Known, pf.Unknown = unknown == "", unknown
	switch {
	case !pf.Known || c.Cached == 0:
		// Unknown residency is read whole, like an uncached file.
		if t.size > 0 {
			pf.Missing = []Range{{0, t.size}}
		}
	case c.Cached >= pagesOf(t.size):
		pf.CachedBytes = t.size
	default:
		if pf.Missing, err = missingRanges(fh, t.size); err != nil {
			return pf, err
		}
	}
	for _, r := range pf.Missing {
		pf.MissingBytes += r.Len
	}
	if pf.Known {
		pf.CachedBytes = t.size - pf.MissingBytes
	}
	return pf, nil
}

// mincoreWindow bounds one mapping (and its 1-byte-per-page vector).
const mincoreWindow = 1 << 30

// missingRanges maps f window by window and asks mincore which pages are
// not resident. Mapping reads nothing; the mapping is gone on return.
func missingRanges(f *os.File, size int64) ([]Range, error) {
	var out []Range
	add := func(off, n int64) {
		if end := off + n; end > size {
			n = size - off
		}
		if k := len(out); k > 0 && out[k-1].Off+out[k-1].Len == off {
			out[k-1].Len += n
			return
		}
		out = append(out, Range{off, n})
	}
	for base := int64(0); base < size; base += mincoreWindow {
		n := min(size-base, mincoreWindow)
		m, err := unix.Mmap(int(f.Fd()), base, int(n), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("map for mincore: %w", err)
		}
		vec := make([]byte, (n+pageSize-1)/pageSize)
		err = mincore(m, vec)
		if uerr := unix.Munmap(m); err == nil && uerr != nil {
			err = uerr
		}
		if err != nil {
			return nil, fmt.Errorf("mincore: %w", err)
		}
		for i, v := range vec {
			if v&1 == 0 {
				add(base+int64(i)*pageSize, pageSize)
			}
		}
	}
	return out, nil
}

// mincore fills vec with one byte per page of the mapping m (x/sys has
// no wrapper on Linux).
func mincore(m, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

// Progress is a prefetch's state, for a progress line.
type Progress struct {
	DoneBytes  int64
	TotalBytes int64
	FilesDone  int
	Files      int
	Elapsed    time.Duration
}

// BytesPerSec is the mean read rate so far.
func (p Progress) BytesPerSec() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.DoneBytes) / p.Elapsed.Seconds()
}

// ETA is the time left at the mean rate so far; 0 when unknown.
func (p Progress) ETA() time.Duration {
	r := p.BytesPerSec()
	if r <= 0 || p.DoneBytes >= p.TotalBytes {
		return 0
	}
	return time.Duration(float64(p.TotalBytes-p.DoneBytes) / r * float64(time.Second))
}

// Options tune Prefetch.
type Options struct {
	// Workers is how many files are read at once (default 4).
	Workers int
	// OnProgress, when set, is called every Every (default 200 ms) and
	// once at the end, from one goroutine.
	OnProgress func(Progress)
	Every      time.Duration
}

// Fetched is what Prefetch read of one file.
type Fetched struct {
	Path      string `json:"path"`
	ReadBytes int64  `json:"read_bytes"`
	Err       error  `json:"-"`
}

// Result is a whole prefetch.
type Result struct {
	Files     []Fetched
	ReadBytes int64
	Elapsed   time.Duration
}

// readChunk is one pread; big enough that the kernel's readahead keeps
// the disk's queue full.
const readChunk = 1 << 20

// Prefetch reads the missing ranges of plan into the page cache, Workers
// files at a time, starting them in plan order. Files are opened with
// a's rights. A cancelled ctx stops it between chunks.
func Prefetch(ctx context.Context, a Actor, plan Plan, opt Options) Result {
	workers := opt.Workers
	if workers <= 0 {
		workers = 4
	}
	every := opt.Every
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	start := time.Now()
	res := Result{Files: make([]Fetched, len(plan.Files))}
	var done atomic.Int64
	var filesDone atomic.Int64
	progress := func() Progress {
		return Progress{DoneBytes: done.Load(), TotalBytes: plan.MissingBytes,
			FilesDone: int(filesDone.Load()), Files: len(plan.Files), Elapsed: time.Since(start)}
	}
	stopTicker := make(chan struct{})
	var tickerDone sync.WaitGroup
	if opt.OnProgress != nil {
		tickerDone.Add(1)
		go func() {
			defer tickerDone.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-stopTicker:
					return
				case <-t.C:
					opt.OnProgress(progress())
				}
			}
		}()
	}

	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, readChunk)
			for i := range next {
				pf := plan.Files[i]
				var n int64
				err := a.Do(func() error {
					var err error
					n, err = readRanges(ctx, pf, buf, &done)
					return err
				})
				res.Files[i] = Fetched{Path: pf.Path, ReadBytes: n, Err: err}
				filesDone.Add(1)
			}
		}()
	}
feed:
	for i := range plan.Files {
		select {
		case next <- i:
		case <-ctx.Done():
			for j := i; j < len(plan.Files); j++ {
				res.Files[j] = Fetched{Path: plan.Files[j].Path, Err: ctx.Err()}
			}
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(stopTicker)
	tickerDone.Wait()
	res.Elapsed = time.Since(start)
	res.ReadBytes = done.Load()
	if opt.OnProgress != nil {
		opt.OnProgress(progress())
	}
	return res
}

// readRanges reads pf's missing ranges with pread, adding to done as it
// goes; it returns the bytes read.
func readRanges(ctx context.Context, pf Planned, buf []byte, done *atomic.Int64) (int64, error) {
	if len(pf.Missing) == 0 {
		return 0, nil
	}
	fh, err := openRegular(pf.Path)
	if err != nil {
		return 0, unwrapPath(err)
	}
	defer fh.Close()
	var total int64
	for _, r := range pf.Missing {
		for off, end := r.Off, r.Off+r.Len; off < end; {
			if err := ctx.Err(); err != nil {
				return total, err
			}
			n, err := fh.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
			off += int64(n)
			total += int64(n)
			done.Add(int64(n))
			if errors.Is(err, io.EOF) {
				break // the file shrank since the plan
			}
			if err != nil {
				return total, fmt.Errorf("read at %d: %w", off, err)
			}
		}
	}
	return total, nil
}
