package attribution

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"slices"

	"github.com/coldtrace/coldtrace/record"
)

// UnidentifiedFile is the path of the FileEvidence (ID -1) that holds the
// disk time no file delta explained, other than OutsidePageCache's.
const UnidentifiedFile = "(file not identified)"

// OutsidePageCache is the path of the FileEvidence (ID OutsidePageCacheID)
// that holds the I/O wait no file's fill or direct read explained: the
// threads waited for I/O outside any page-cache fill (a sync, a write's
// throttling, a read no sensor names). A rerun waits for it again.
const OutsidePageCache = "[I/O outside the page cache]"

// OutsidePageCacheID is OutsidePageCache's evidence ID.
const OutsidePageCacheID = -2

// FileEvidence is one file behind disk_read. ID is the record's File.ID,
// or -1 for disk time no file delta explained.
type FileEvidence struct {
	ID   int    `json:"id"`
	Path string `json:"path"`
	// NS is the file's part of the disk_read row; Share is NS over the row.
	NS    int64   `json:"ns"`
	Share float64 `json:"share"`
	// The record's totals for the file.
	BytesFromDisk uint64 `json:"bytes_from_disk"`
	PagesAccessed uint64 `json:"pages_accessed"`
	PagesMissed   uint64 `json:"pages_missed"`
	// MissRatio is PagesMissed/PagesAccessed, at most 1 (readahead can
	// insert pages nobody asked for).
	MissRatio float64 `json:"miss_ratio"`
	IOWaitNS  int64   `json:"io_wait_ns"`
	MissCPUNS int64   `json:"miss_cpu_ns"`
	// FillWaitNS, PagesReread, PagesShared: the record's (record.File).
	FillWaitNS  int64  `json:"fill_wait_ns,omitempty"`
	PagesReread uint64 `json:"pages_reread,omitempty"`
	PagesShared uint64 `json:"pages_shared,omitempty"`
	// DirectBytes and DirectWaitNS: the record's direct I/O of the file
	// (record.File), which bypasses the page cache.
	DirectBytes  uint64 `json:"direct_bytes,omitempty"`
	DirectWaitNS int64  `json:"direct_wait_ns,omitempty"`
	// RecurringNS is the part of NS a rerun pays again whatever the cache
	// holds: the file's direct-I/O share of its time, or all of the row
	// of I/O outside the page cache.
	RecurringNS int64 `json:"recurring_ns,omitempty"`
	// Stacks split NS over the Python stacks that filled the file, in
	// proportion to their thread time (record.File.Stacks), most first;
	// the rest of NS took no stack.
	Stacks []StackShare `json:"stacks,omitempty"`
	// NoStackNS is the part of NS no stack carries (waits outside a fill,
	// threads that are not Python), when Stacks is not empty.
	NoStackNS int64 `json:"no_stack_ns,omitempty"`
}

// StackShare is one Python stack's part of a subject's time: NS of the
// wall-clock row (the subject's NS split by thread time), ThreadNS and
// Bytes as the record charged them.
type StackShare struct {
	Stack    int    `json:"stack"` // 1 + index in the record's stacks
	PID      int32  `json:"pid,omitempty"`
	NS       int64  `json:"ns"`
	ThreadNS int64  `json:"thread_ns"`
	Bytes    uint64 `json:"bytes"`
	// BytesFromDisk: inserted while its fill was open (record.StackCharge).
	BytesFromDisk uint64 `json:"bytes_from_disk,omitempty"`
}

// stackShares splits ns over charges in proportion to their thread time
// out of total (the subject's whole thread time, stacks or not).
func stackShares(charges []record.StackCharge, ns, total int64) []StackShare {
	if len(charges) == 0 {
		return nil
	}
	var sum int64
	for _, c := range charges {
		sum += max(c.NS, 0)
	}
	total = max(total, sum)
	out := make([]StackShare, 0, len(charges))
	for _, c := range charges {
		sh := StackShare{Stack: c.Stack, PID: c.PID, ThreadNS: c.NS, Bytes: c.Bytes, BytesFromDisk: c.BytesFromDisk}
		if total > 0 {
			sh.NS = int64(math.Round(float64(ns) * float64(max(c.NS, 0)) / float64(total)))
		}
		out = append(out, sh)
	}
	slices.SortStableFunc(out, func(x, y StackShare) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(y.ThreadNS, x.ThreadNS), cmp.Compare(y.Bytes, x.Bytes), cmp.Compare(x.Stack, y.Stack))
	})
	return out
}

// recurringNS is the part of ns, a file's time in the disk_read row, spent
// waiting on its direct reads: its share of the file's disk time.
func recurringNS(f *record.File, ns int64) int64 {
	total := max(f.IOWaitNS, 0) + max(f.MissCPUNS, 0) + max(f.FillWaitNS, 0)
	direct := min(max(f.DirectWaitNS, 0), max(f.IOWaitNS, 0))
	if direct <= 0 || total <= 0 {
		return 0
	}
	return int64(math.Round(float64(ns) * float64(direct) / float64(total)))
}

// CompilerEvidence is one source of compile time: a compiler program run
// as a subprocess (Kind "compiler", Name its comm) or a JIT window's source
// (Kind and Name from the window).
type CompilerEvidence struct {
	Kind  string  `json:"kind"`
	Name  string  `json:"name"`
	NS    int64   `json:"ns"`
	Share float64 `json:"share"`
	// Runs and CPUNS are the record's compiler totals when it has them,
	// else counted from the processes.
	Runs  int   `json:"runs,omitempty"`
	CPUNS int64 `json:"cpu_ns,omitempty"`
	// Stacks split NS over the Python stacks of the source's windows (a
	// compile call's stack at the call, an in-process cache miss's at
	// the miss: record.JITWindow.Stack), in proportion to their time,
	// most first; the rest of NS took no stack. A compiler subprocess's
	// stack is its process's (record.Process.Stack), not here.
	Stacks []StackShare `json:"stacks,omitempty"`
}

// CacheEvidence is one kernel/JIT cache directory from the record, with
// its statistics as the record has them. NS is the compile time whose JIT
// windows name the cache as their source.
type CacheEvidence struct {
	record.Cache
	NS    int64   `json:"ns"`
	Share float64 `json:"share"`
}

// GPUEvidence is one device behind gpu_compute.
type GPUEvidence struct {
	Index int     `json:"index"`
	Name  string  `json:"name,omitempty"`
	NS    int64   `json:"ns"`
	Share float64 `json:"share"`
	// BusyNS is utilisation × time over the run (scaled by the run's share
	// of the device when known), whatever the partition gave the row.
	BusyNS int64 `json:"busy_ns"`
	// Device is the record's summary of the device (mean and peak
	// utilisation, VRAM, the run's share); empty for a device the record
	// does not describe.
	Device record.GPUSummary `json:"device"`
}

// DownloadEvidence is one destination behind download: a file (Path), or
// a peer for data kept in memory. Where several downloads wrote the same
// path, Peer, Host and Cache are the first one's and the rate is over
// their spans together.
type DownloadEvidence struct {
	// Path is the destination file, or "(in memory, from PEER)".
	Path string `json:"path"`
	// Name is what the destination is known by ("model.safetensors" for
	// a Hugging Face blob), or Path's last element.
	Name  string  `json:"name"`
	NS    int64   `json:"ns"`
	Share float64 `json:"share"`
	Bytes uint64  `json:"bytes"`
	Count int     `json:"count"`
	// SpanNS is the downloads' own first-to-last-byte time, summed.
	SpanNS int64 `json:"span_ns"`
	// MBPerS is Bytes over SpanNS, in 10^6 bytes per second.
	MBPerS float64 `json:"mb_per_s"`
	Peer   string  `json:"peer"`
	Host   string  `json:"host,omitempty"`
	// Cache names the cache the data landed in, and CacheFramework its
	// owner ("Hugging Face hub (weights)"), CacheFS its filesystem.
	Cache          string `json:"cache,omitempty"`
	CacheFramework string `json:"cache_framework,omitempty"`
	CacheFS        string `json:"cache_fs,omitempty"`
	// Fate says whether a warm rerun downloads it again, and why.
	Fate Fate `json:"fate"`
}

// ProcessEvidence is one process's part of a row.
type ProcessEvidence struct {
	PID   int32   `json:"pid"`
	Comm  string  `json:"comm"`
	NS    int64   `json:"ns"`
	Share float64 `json:"share"`
}

func share(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

func (a *analyzer) breakdown() []Row {
	rows := make([]Row, numCategories)
	pcts := Apportion(func() []float64 {
		w := make([]float64, numCategories)
		for i, v := range a.total {
			w[i] = float64(v)
		}
		return w
	}(), 100)
	for i, c := range Categories {
		rows[i] = Row{
			Category: c,
			NS:       a.total[i],
			Share:    share(a.total[i], a.wall),
			Pct:      int(pcts[i]),
			SignalNS: int64(math.Round(a.signal[i])),
		}
	}
	disk, jit, gpu, dl, cpu := &rows[iDisk], &rows[iJIT], &rows[iGPU], &rows[iDownload], &rows[iCPU]
	disk.Files = a.fileEvidence(disk.NS)
	disk.Processes = a.procEvidence(&a.diskProcs, disk.NS)
	jit.Compilers = a.compilerEvidence(jit.NS)
	jit.Caches = a.cacheEvidence(jit.NS)
	jit.Processes = a.procEvidence(&a.jitProcs, jit.NS)
	gpu.GPUs = a.gpuEvidence(gpu.NS)
	dl.Downloads = a.downloadEvidence(dl.NS)
	cpu.Processes = a.procEvidence(&a.cpuProcs, cpu.NS)
	return rows
}

func (a *analyzer) fileEvidence(rowNS int64) []FileEvidence {
	ns := a.files.allot(rowNS)
	out := make([]FileEvidence, 0, len(a.files.keys))
	seen := make(map[int]bool, len(a.files.keys))
	for i, id := range a.files.keys {
		seen[id] = true
		out = append(out, a.fileInfo(id, ns[i], rowNS))
	}
	// Files that came from disk without costing attributed time still
	// belong in the evidence, after the others.
	for _, f := range a.r.Files {
		if f.PagesMissed > 0 && !seen[f.ID] {
			seen[f.ID] = true
			out = append(out, a.fileInfo(f.ID, 0, rowNS))
		}
	}
	// Each id is here once, so the order is total and needs no stable
	// sort (whose rotations of these structs took a record of a million
	// files seconds).
	slices.SortFunc(out, func(x, y FileEvidence) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(y.BytesFromDisk, x.BytesFromDisk),
			cmp.Compare(x.Path, y.Path), cmp.Compare(x.ID, y.ID))
	})
	return out
}

func (a *analyzer) fileInfo(id int, ns, rowNS int64) FileEvidence {
	fe := FileEvidence{ID: id, NS: ns, Share: share(ns, rowNS)}
	if id == OutsidePageCacheID {
		fe.Path = OutsidePageCache
		fe.RecurringNS = ns
		return fe
	}
	if id < 0 {
		fe.ID = -1
		fe.Path = UnidentifiedFile
		return fe
	}
	f := a.r.FileByID(id)
	if f == nil {
		fe.Path = fmt.Sprintf("(file #%d)", id)
		return fe
	}
	fe.Path = f.Name()
	fe.BytesFromDisk, fe.PagesAccessed, fe.PagesMissed = f.BytesFromDisk, f.PagesAccessed, f.PagesMissed
	fe.FillWaitNS, fe.PagesReread, fe.PagesShared = f.FillWaitNS, f.PagesReread, f.PagesShared
	fe.IOWaitNS, fe.MissCPUNS = f.IOWaitNS, f.MissCPUNS
	fe.DirectBytes, fe.DirectWaitNS = f.DirectBytes, f.DirectWaitNS
	fe.RecurringNS = recurringNS(f, ns)
	fe.Stacks = stackShares(f.Stacks, ns, max(f.IOWaitNS, 0)+max(f.MissCPUNS, 0)+max(f.FillWaitNS, 0))
	if len(fe.Stacks) > 0 {
		fe.NoStackNS = ns
		for _, sh := range fe.Stacks {
			fe.NoStackNS -= sh.NS
		}
		fe.NoStackNS = max(fe.NoStackNS, 0)
	}
	if f.PagesAccessed > 0 {
		fe.MissRatio = min(1, float64(f.PagesMissed)/float64(f.PagesAccessed))
	} else if f.PagesMissed > 0 {
		fe.MissRatio = 1
	}
	return fe
}

func (a *analyzer) procEvidence(t *tally[int32], rowNS int64) []ProcessEvidence {
	ns := t.allot(rowNS)
	out := make([]ProcessEvidence, 0, len(t.keys))
	for i, pid := range t.keys {
		comm := "?"
		if p := a.procs[pid]; p != nil {
			comm = p.Name()
		} else {
			for _, th := range a.r.Threads {
				if th.PID == pid && th.Comm != "" {
					comm = th.Comm
					break
				}
			}
		}
		out = append(out, ProcessEvidence{PID: pid, Comm: comm, NS: ns[i], Share: share(ns[i], rowNS)})
	}
	slices.SortStableFunc(out, func(x, y ProcessEvidence) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(x.PID, y.PID))
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

func (a *analyzer) compilerEvidence(rowNS int64) []CompilerEvidence {
	ns := a.jitSrc.allot(rowNS)
	out := make([]CompilerEvidence, 0, len(a.jitSrc.keys))
	for i, k := range a.jitSrc.keys {
		ce := CompilerEvidence{Kind: k.kind, Name: k.name, NS: ns[i], Share: share(ns[i], rowNS)}
		if k.kind == "compiler" {
			ce.Runs, ce.CPUNS = a.compilerTotals(k.name)
		} else {
			ce.Stacks = a.windowStacks(k, ns[i])
		}
		out = append(out, ce)
	}
	if a.r.JIT != nil {
		// Compilers the record lists that no sample saw at work.
		for _, c := range a.r.JIT.Compilers {
			if a.jitSrc.get(srcKey{"compiler", c.Name}) == 0 && c.Name != "" {
				out = append(out, CompilerEvidence{Kind: "compiler", Name: c.Name, Runs: c.Runs, CPUNS: c.CPUNS})
			}
		}
	}
	slices.SortStableFunc(out, func(x, y CompilerEvidence) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(y.CPUNS, x.CPUNS),
			cmp.Compare(x.Name, y.Name), cmp.Compare(x.Kind, y.Kind))
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// windowStacks splits ns, the row's time of JIT source k, over the Python
// stacks of k's windows by their length.
func (a *analyzer) windowStacks(k srcKey, ns int64) []StackShare {
	if a.r.JIT == nil || len(a.r.Stacks) == 0 {
		return nil
	}
	var total int64
	by := map[[2]int64]*record.StackCharge{}
	var order [][2]int64
	for _, w := range a.r.JIT.Windows {
		d := w.EndNS - w.StartNS
		if windowSource(w) != k || d <= 0 {
			continue
		}
		total += d
		if w.Stack <= 0 {
			continue
		}
		key := [2]int64{int64(w.Stack), int64(w.PID)}
		c := by[key]
		if c == nil {
			c = &record.StackCharge{Stack: w.Stack, PID: w.PID}
			by[key] = c
			order = append(order, key)
		}
		c.NS += d
	}
	charges := make([]record.StackCharge, 0, len(order))
	for _, key := range order {
		charges = append(charges, *by[key])
	}
	return stackShares(charges, ns, total)
}

// compilerTotals is the record's run count and CPU time for a compiler,
// or, when the JIT section does not list it, those of its processes.
func (a *analyzer) compilerTotals(name string) (runs int, cpu int64) {
	if a.r.JIT != nil {
		for _, c := range a.r.JIT.Compilers {
			if c.Name == name {
				return c.Runs, c.CPUNS
			}
		}
	}
	for pid, n := range a.compiler {
		if n == name {
			runs++
			if p := a.procs[pid]; p != nil {
				cpu += p.CPUNS
			}
		}
	}
	return runs, cpu
}

func (a *analyzer) cacheEvidence(rowNS int64) []CacheEvidence {
	if a.r.JIT == nil || len(a.r.JIT.Caches) == 0 {
		return nil
	}
	ns := a.jitSrc.allot(rowNS)
	byName := map[string]int64{}
	for i, k := range a.jitSrc.keys {
		byName[k.name] += ns[i]
	}
	out := make([]CacheEvidence, 0, len(a.r.JIT.Caches))
	for _, c := range a.r.JIT.Caches {
		n := byName[c.Name]
		out = append(out, CacheEvidence{Cache: c, NS: n, Share: share(n, rowNS)})
	}
	slices.SortStableFunc(out, func(x, y CacheEvidence) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(y.CompileNS, x.CompileNS),
			cmp.Compare(y.Misses, x.Misses), cmp.Compare(x.Name, y.Name), cmp.Compare(x.Root, y.Root))
	})
	return out
}

func (a *analyzer) gpuEvidence(rowNS int64) []GPUEvidence {
	ns := a.gpuDev.allot(rowNS)
	var out []GPUEvidence
	for _, dt := range a.gpus {
		ge := GPUEvidence{Index: dt.index, Device: record.GPUSummary{Index: dt.index}}
		if i, ok := a.gpuDev.idx[dt.index]; ok {
			ge.NS = ns[i]
		}
		ge.Share = share(ge.NS, rowNS)
		var busy float64
		for _, sp := range dt.spans {
			busy += float64(sp.end-sp.start) * sp.util
		}
		ge.BusyNS = int64(math.Round(busy))
		for _, s := range a.gpuSums {
			if s.Index == dt.index {
				ge.Name, ge.Device = s.Name, s
				break
			}
		}
		out = append(out, ge)
	}
	slices.SortStableFunc(out, func(x, y GPUEvidence) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(y.BusyNS, x.BusyNS), cmp.Compare(x.Index, y.Index))
	})
	return out
}

func (a *analyzer) downloadEvidence(rowNS int64) []DownloadEvidence {
	if len(a.r.Downloads) == 0 {
		return nil
	}
	ns := a.dlPath.allot(rowNS)
	idx := map[string]int{}
	var out []DownloadEvidence
	for _, d := range a.r.Downloads {
		key := DownloadKey(d)
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			fate, c := FateOf(a.r, d)
			de := DownloadEvidence{Path: key, Name: d.Name, Peer: d.Peer, Host: d.Host, Fate: fate}
			if de.Name == "" {
				de.Name = path.Base(d.Path)
				if d.Path == "" {
					de.Name = key
				}
			}
			if c != nil {
				de.Cache, de.CacheFramework, de.CacheFS = c.Name, c.Framework, c.FS
			}
			if j, ok := a.dlPath.idx[key]; ok {
				de.NS = ns[j]
				de.Share = share(ns[j], rowNS)
			}
			out = append(out, de)
		}
		e := &out[i]
		e.Bytes += d.Bytes
		e.Count++
		e.SpanNS += max(d.EndNS-d.StartNS, 0)
		if f, _ := FateOf(a.r, d); !f.Kept() {
			// One repeat makes the destination's fetch a repeat.
			e.Fate = f
		}
	}
	for i := range out {
		if out[i].SpanNS > 0 {
			out[i].MBPerS = float64(out[i].Bytes) / 1e6 / (float64(out[i].SpanNS) / 1e9)
		}
	}
	slices.SortStableFunc(out, func(x, y DownloadEvidence) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(y.Bytes, x.Bytes), cmp.Compare(x.Path, y.Path))
	})
	return out
}

// MarshalJSON writes the cache's own keys and then ns and share. Without
// it the embedded record.Cache's MarshalJSON would be promoted and the
// row's part of the time would never be written.
func (c CacheEvidence) MarshalJSON() ([]byte, error) {
	base, err := json.Marshal(c.Cache)
	if err != nil {
		return nil, err
	}
	part, err := json.Marshal(struct {
		NS    int64   `json:"ns"`
		Share float64 `json:"share"`
	}{c.NS, c.Share})
	if err != nil {
		return nil, err
	}
	if len(base) < 2 || base[len(base)-1] != '}' {
		return nil, fmt.Errorf("cache %s: not a JSON object", c.Name)
	}
	if len(base) == 2 {
		return part, nil
	}
	out := append(base[:len(base)-1:len(base)-1], ',')
	return append(out, part[1:]...), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *CacheEvidence) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &c.Cache); err != nil {
		return err
	}
	var part struct {
		NS    int64   `json:"ns"`
		Share float64 `json:"share"`
	}
	if err := json.Unmarshal(b, &part); err != nil {
		return err
	}
	c.NS, c.Share = part.NS, part.Share
	return nil
}
