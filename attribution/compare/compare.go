package compare

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/record"
)

// Diff compares two runs, A (typically the cold one) and B. Every delta
// is B minus A: negative when B spent less. Each breakdown sums to its
// run's wall time, so the categories' deltas sum to DeltaNS exactly.
type Diff struct {
	A Run `json:"a"`
	B Run `json:"b"`
	// DeltaNS is B's wall time minus A's.
	DeltaNS   int64      `json:"delta_ns"`
	Breakdown []Row      `json:"breakdown"`
	Files     []File     `json:"files"`
	Caches    []Cache    `json:"caches"`
	Compilers []Compiler `json:"compilers"`
	GPUs      []GPU      `json:"gpus"`
	Downloads []Download `json:"downloads"`
	// CallSites compare the lines of the user's Python code behind disk
	// reads, compiles and downloads (attribution.CallSiteTimes), largest
	// change first.
	CallSites []CallSite `json:"call_sites,omitempty"`
	// CacheChanges say, for each cache B missed in, whether A's entries
	// were there to use: a moved root or a changed key.
	CacheChanges []advice.CacheChange `json:"cache_changes"`
	// CacheCandidates are directories A filled that B read back without
	// rewriting and that no known cache accounts for.
	CacheCandidates []advice.CacheCandidate `json:"cache_candidates,omitempty"`
	// LateA and LateB are each run's compiles after ready.
	LateA *advice.LateCompiles `json:"compiles_after_ready_a,omitempty"`
	// StallsA and StallsB are each run's download stalls.
	StallsA []advice.DownloadStall `json:"download_stalls_a,omitempty"`
	StallsB []advice.DownloadStall `json:"download_stalls_b,omitempty"`
	// SilentA, SilentB, SlowDNSA and SlowDNSB are each run's silent
	// connections and slow name lookups.
	SilentA  []advice.SilentWait `json:"silent_connections_a,omitempty"`
	SilentB  []advice.SilentWait `json:"silent_connections_b,omitempty"`
	SlowDNSA []advice.SlowLookup `json:"slow_dns_a,omitempty"`
	SlowDNSB []advice.SlowLookup `json:"slow_dns_b,omitempty"`
	// BrokenA and BrokenB are each run's caches that did not keep what it
	// compiled.
	BrokenA []advice.BrokenCache `json:"broken_caches_a,omitempty"`
	BrokenB []advice.BrokenCache `json:"broken_caches_b,omitempty"`
	LateB   *advice.LateCompiles `json:"compiles_after_ready_b,omitempty"`
	// Warnings say why the two runs may not be comparable: other hosts,
	// other commands, lost events.
	Warnings []string `json:"warnings,omitempty"`
	// Verdict says which categories made the difference, as data;
	// report/words says it.
	Verdict Verdict `json:"verdict"`
}

// Run describes one side.
type Run struct {
	Command       []string  `json:"command"`
	Host          string    `json:"host"`
	Kernel        string    `json:"kernel,omitempty"`
	Start         time.Time `json:"start"`
	WallNS        int64     `json:"wall_ns"`
	ExitCode      int       `json:"exit_code"`
	Cold          bool      `json:"cold"`
	BytesFromDisk uint64    `json:"bytes_from_disk"`
	PagesMissed   uint64    `json:"pages_missed"`
	LostEvents    uint64    `json:"lost_events"`
	// Verdict is the run's own verdict.
	Verdict attribution.Verdict `json:"verdict"`
	// MadeCold is set when coldtrace made the run cold on purpose (run
	// --cold).
	MadeCold *record.MadeCold `json:"made_cold,omitempty"`
}

// Row is one breakdown row on both sides.
type Row struct {
	Category attribution.Category `json:"category"`
	ANS      int64                `json:"a_ns"`
	BNS      int64                `json:"b_ns"`
	DeltaNS  int64                `json:"delta_ns"`
}

// Change values of a File.
const (
	FileCached       = "cached"         // missed in A, (almost) all hits in B
	FileUncached     = "not cached"     // (almost) all hits in A, missed in B
	FileMissedInBoth = "missed in both" // came from disk both times
	FileCachedInBoth = "cached in both" // no page came from disk
	FileOnlyInA      = "only in A"
	// FileDirectInBoth: read with direct I/O, which bypasses the page
	// cache, both times, and no page of it came through the cache: every
	// run reads it from disk.
	FileDirectInBoth = "direct I/O in both"
	FileOnlyInB      = "only in B"
)

// File is one file, matched by path.
type File struct {
	Path           string `json:"path"`
	APagesAccessed uint64 `json:"a_pages_accessed"`
	BPagesAccessed uint64 `json:"b_pages_accessed"`
	APagesMissed   uint64 `json:"a_pages_missed"`
	BPagesMissed   uint64 `json:"b_pages_missed"`
	ABytesFromDisk uint64 `json:"a_bytes_from_disk"`
	BBytesFromDisk uint64 `json:"b_bytes_from_disk"`
	// A/BDiskNS are the file's part of the disk_read row.
	ADiskNS int64 `json:"a_disk_ns"`
	BDiskNS int64 `json:"b_disk_ns"`
	// A/BIOWaitNS are thread-time blocked on I/O for the file.
	AIOWaitNS int64 `json:"a_io_wait_ns"`
	BIOWaitNS int64 `json:"b_io_wait_ns"`
	// A/BDirectBytes are bytes read with direct I/O (record.File).
	ADirectBytes uint64 `json:"a_direct_bytes,omitempty"`
	BDirectBytes uint64 `json:"b_direct_bytes,omitempty"`
	Change       string `json:"change"`

	inA, inB bool
}

// Cache is one kernel/JIT cache, matched by name.
type Cache struct {
	Name            string `json:"name"`
	Root            string `json:"root"`
	ALookups        uint64 `json:"a_lookups"`
	BLookups        uint64 `json:"b_lookups"`
	AMisses         uint64 `json:"a_misses"`
	BMisses         uint64 `json:"b_misses"`
	AHits           uint64 `json:"a_hits"`
	BHits           uint64 `json:"b_hits"`
	AEntriesWritten uint64 `json:"a_entries_written"`
	BEntriesWritten uint64 `json:"b_entries_written"`
	// A/BCompileNS are the compile time the record files under the
	// cache (its compile_ns).
	ACompileNS int64 `json:"a_compile_ns"`
	BCompileNS int64 `json:"b_compile_ns"`
	// BecameHits counts A's misses that B found in the cache: B's extra
	// hits, at most A's misses.
	BecameHits uint64 `json:"became_hits"`
}

// Compiler is one source of compile time (a compiler program, or a
// JIT window source), matched by kind and name.
type Compiler struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	ARuns  int    `json:"a_runs"`
	BRuns  int    `json:"b_runs"`
	ACPUNS int64  `json:"a_cpu_ns"`
	BCPUNS int64  `json:"b_cpu_ns"`
	// A/BNS are its part of the jit_compile row.
	ANS int64 `json:"a_ns"`
	BNS int64 `json:"b_ns"`
}

// GPU is one GPU, matched by index.
type GPU struct {
	Index          int     `json:"index"`
	Name           string  `json:"name"`
	AUtilMeanPct   float64 `json:"a_util_mean_pct"`
	BUtilMeanPct   float64 `json:"b_util_mean_pct"`
	ABusyNS        int64   `json:"a_busy_ns"`
	BBusyNS        int64   `json:"b_busy_ns"`
	AVRAMPeakBytes uint64  `json:"a_vram_peak_bytes"`
	BVRAMPeakBytes uint64  `json:"b_vram_peak_bytes"`
	// A/BNS are its part of the gpu_compute row.
	ANS int64 `json:"a_ns"`
	BNS int64 `json:"b_ns"`
	// A/B VRAM at the start and end of each side, and what its traced
	// processes allocated in it (attribution.SegmentGPU): what a diff of
	// two segments shows of a first round that loads and a later one
	// that reuses.
	AVRAMStartBytes uint64 `json:"a_vram_start_bytes,omitempty"`
	BVRAMStartBytes uint64 `json:"b_vram_start_bytes,omitempty"`
	AVRAMEndBytes   uint64 `json:"a_vram_end_bytes,omitempty"`
	BVRAMEndBytes   uint64 `json:"b_vram_end_bytes,omitempty"`
	AAllocatedBytes uint64 `json:"a_allocated_bytes,omitempty"`
	BAllocatedBytes uint64 `json:"b_allocated_bytes,omitempty"`
}

// Download is one fetched destination, matched by path (a download kept
// in memory, by its peer); Name is what it is known by and Cache the cache
// it landed in, from whichever run downloaded it.
type Download struct {
	Path   string `json:"path"`
	Name   string `json:"name"`
	Cache  string `json:"cache,omitempty"`
	ABytes uint64 `json:"a_bytes"`
	BBytes uint64 `json:"b_bytes"`
	ANS    int64  `json:"a_ns"`
	BNS    int64  `json:"b_ns"`
}

// New compares records a and b. ra and rb are their attributions;
// nil means attribution.Analyze.
func New(a, b *record.Record, ra, rb *attribution.Result) *Diff {
	if a == nil {
		a = &record.Record{}
	}
	if b == nil {
		b = &record.Record{}
	}
	if ra == nil {
		ra = attribution.Analyze(a)
	}
	if rb == nil {
		rb = attribution.Analyze(b)
	}
	d := &Diff{A: run(a, ra), B: run(b, rb), DeltaNS: rb.WallNS - ra.WallNS}
	for _, c := range attribution.Categories {
		var an, bn int64
		if row := ra.Row(c); row != nil {
			an = row.NS
		}
		if row := rb.Row(c); row != nil {
			bn = row.NS
		}
		d.Breakdown = append(d.Breakdown, Row{Category: c, ANS: an, BNS: bn, DeltaNS: bn - an})
	}
	d.Files = files(a, b, ra, rb)
	d.Caches = caches(a, b)
	d.CacheChanges = append([]advice.CacheChange{}, advice.Compare(a, b)...)
	d.CacheCandidates = advice.CacheCandidates(a, b)
	d.LateA, d.LateB = advice.AfterReady(a), advice.AfterReady(b)
	d.StallsA, d.StallsB = advice.Stalls(a), advice.Stalls(b)
	d.SilentA, d.SilentB = advice.SilentWaits(a), advice.SilentWaits(b)
	d.SlowDNSA, d.SlowDNSB = advice.SlowLookups(a), advice.SlowLookups(b)
	d.BrokenA, d.BrokenB = advice.BrokenCaches(a), advice.BrokenCaches(b)
	d.Compilers = compilers(ra, rb)
	d.GPUs = gpus(ra, rb)
	gpuVRAM(d.GPUs, a, b)
	d.Downloads = downloads(ra, rb)
	d.CallSites = callSites(a, b, ra, rb)
	d.Warnings = warnings(a, b)
	d.Verdict = d.verdict()
	d.Verdict.Machine = machineChanges(a, b, ra, rb)
	return d
}

func run(r *record.Record, res *attribution.Result) Run {
	out := Run{Command: r.Command, Host: r.Host.Hostname, Kernel: r.Host.Kernel, Start: r.Start,
		WallNS: res.WallNS, ExitCode: r.ExitCode, Cold: res.Cold, LostEvents: r.Lost.Total(), Verdict: res.Verdict,
		MadeCold: r.MadeCold}
	if out.Command == nil {
		out.Command = []string{}
	}
	for _, f := range r.Files {
		out.BytesFromDisk += f.BytesFromDisk
		out.PagesMissed += f.PagesMissed
	}
	return out
}

// rowsByKey collects diff rows by key, in the order keys are first seen.
type rowsByKey[V any] struct {
	idx  map[string]int
	rows []V
}

// get returns the row of key, made by fresh when the key is new.
func (r *rowsByKey[V]) get(key string, fresh func() V) *V {
	if r.idx == nil {
		r.idx = map[string]int{}
	}
	i, ok := r.idx[key]
	if !ok {
		i = len(r.rows)
		r.idx[key] = i
		r.rows = append(r.rows, fresh())
	}
	return &r.rows[i]
}

func files(a, b *record.Record, ra, rb *attribution.Result) []File {
	var rows rowsByKey[File]
	get := func(key string) *File { return rows.get(key, func() File { return File{Path: key} }) }
	diskNS := func(res *attribution.Result) map[int]int64 {
		m := map[int]int64{}
		if row := res.Row(attribution.DiskRead); row != nil {
			for _, f := range row.Files {
				m[f.ID] += f.NS
			}
		}
		return m
	}
	an, bn := diskNS(ra), diskNS(rb)
	for _, f := range a.Files {
		df := get(f.Name())
		df.inA = true
		df.APagesAccessed += f.PagesAccessed
		df.APagesMissed += f.PagesMissed
		df.ABytesFromDisk += f.BytesFromDisk
		df.AIOWaitNS += f.IOWaitNS
		df.ADirectBytes += f.DirectBytes
		df.ADiskNS += an[f.ID]
	}
	for _, f := range b.Files {
		df := get(f.Name())
		df.inB = true
		df.BPagesAccessed += f.PagesAccessed
		df.BPagesMissed += f.PagesMissed
		df.BBytesFromDisk += f.BytesFromDisk
		df.BIOWaitNS += f.IOWaitNS
		df.BDirectBytes += f.DirectBytes
		df.BDiskNS += bn[f.ID]
	}
	for _, u := range []struct {
		id   int
		name string
	}{{-1, attribution.UnidentifiedFile}, {attribution.OutsidePageCacheID, attribution.OutsidePageCache}} {
		if n, m := an[u.id], bn[u.id]; n != 0 || m != 0 {
			df := get(u.name)
			df.inA, df.inB = n != 0, m != 0
			df.ADiskNS, df.BDiskNS = n, m
		}
	}
	out := rows.rows
	for i := range out {
		f := &out[i]
		switch {
		case !f.inB:
			f.Change = FileOnlyInA
		case !f.inA:
			f.Change = FileOnlyInB
		case f.APagesMissed == 0 && f.BPagesMissed == 0 && f.ADirectBytes > 0 && f.BDirectBytes > 0:
			f.Change = FileDirectInBoth
		case f.APagesMissed == 0 && f.BPagesMissed == 0:
			f.Change = FileCachedInBoth
		case f.APagesMissed > 0 && f.BPagesMissed*10 <= f.APagesMissed:
			f.Change = FileCached
		case f.BPagesMissed > 0 && f.APagesMissed*10 <= f.BPagesMissed:
			f.Change = FileUncached
		default:
			f.Change = FileMissedInBoth
		}
	}
	// Heaviest change in disk time first, then in bytes from disk.
	slices.SortStableFunc(out, func(x, y File) int {
		return cmp.Or(cmp.Compare(absI(y.BDiskNS-y.ADiskNS), absI(x.BDiskNS-x.ADiskNS)),
			cmp.Compare(absU(y.BBytesFromDisk, y.ABytesFromDisk), absU(x.BBytesFromDisk, x.ABytesFromDisk)),
			cmp.Compare(max(y.APagesMissed, y.BPagesMissed), max(x.APagesMissed, x.BPagesMissed)),
			cmp.Compare(x.Path, y.Path))
	})
	if out == nil {
		out = []File{}
	}
	return out
}

func absI(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func absU(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

func caches(a, b *record.Record) []Cache {
	var rows rowsByKey[Cache]
	get := func(name, root string) *Cache {
		return rows.get(name, func() Cache { return Cache{Name: name, Root: root} })
	}
	if a.JIT != nil {
		for _, c := range a.JIT.Caches {
			dc := get(c.Name, c.Root)
			dc.ALookups += c.Lookups
			dc.AMisses += c.Misses
			dc.AHits += c.Hits
			dc.AEntriesWritten += c.EntriesWritten
			dc.ACompileNS += c.CompileNS
		}
	}
	if b.JIT != nil {
		for _, c := range b.JIT.Caches {
			dc := get(c.Name, c.Root)
			dc.BLookups += c.Lookups
			dc.BMisses += c.Misses
			dc.BHits += c.Hits
			dc.BEntriesWritten += c.EntriesWritten
			dc.BCompileNS += c.CompileNS
		}
	}
	out := rows.rows
	for i := range out {
		c := &out[i]
		if c.BHits > c.AHits {
			c.BecameHits = min(c.BHits-c.AHits, c.AMisses)
		}
	}
	slices.SortStableFunc(out, func(x, y Cache) int {
		return cmp.Or(cmp.Compare(y.BecameHits, x.BecameHits), cmp.Compare(absI(y.BCompileNS-y.ACompileNS), absI(x.BCompileNS-x.ACompileNS)),
			cmp.Compare(max(y.AMisses, y.BMisses), max(x.AMisses, x.BMisses)), cmp.Compare(x.Name, y.Name))
	})
	if out == nil {
		out = []Cache{}
	}
	return out
}

func compilers(ra, rb *attribution.Result) []Compiler {
	type key struct{ kind, name string }
	idx := map[key]int{}
	var out []Compiler
	get := func(kind, name string) *Compiler {
		k := key{kind, name}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Compiler{Kind: kind, Name: name})
		}
		return &out[i]
	}
	if row := ra.Row(attribution.JITCompile); row != nil {
		for _, c := range row.Compilers {
			dc := get(c.Kind, c.Name)
			dc.ARuns, dc.ACPUNS, dc.ANS = dc.ARuns+c.Runs, dc.ACPUNS+c.CPUNS, dc.ANS+c.NS
		}
	}
	if row := rb.Row(attribution.JITCompile); row != nil {
		for _, c := range row.Compilers {
			dc := get(c.Kind, c.Name)
			dc.BRuns, dc.BCPUNS, dc.BNS = dc.BRuns+c.Runs, dc.BCPUNS+c.CPUNS, dc.BNS+c.NS
		}
	}
	slices.SortStableFunc(out, func(x, y Compiler) int {
		return cmp.Or(cmp.Compare(absI(y.BNS-y.ANS), absI(x.BNS-x.ANS)), cmp.Compare(absI(y.BCPUNS-y.ACPUNS), absI(x.BCPUNS-x.ACPUNS)),
			cmp.Compare(x.Name, y.Name), cmp.Compare(x.Kind, y.Kind))
	})
	if out == nil {
		out = []Compiler{}
	}
	return out
}

// gpuVRAM fills the GPUs' VRAM at each side's start and end and what it
// allocated.
func gpuVRAM(out []GPU, a, b *record.Record) {
	for i := range out {
		g := &out[i]
		for _, s := range attribution.SegmentGPUs(a, 0, a.WallNS) {
			if s.Index == g.Index {
				g.AVRAMStartBytes, g.AVRAMEndBytes, g.AAllocatedBytes = s.VRAMStartBytes, s.VRAMEndBytes, s.AllocatedBytes
			}
		}
		for _, s := range attribution.SegmentGPUs(b, 0, b.WallNS) {
			if s.Index == g.Index {
				g.BVRAMStartBytes, g.BVRAMEndBytes, g.BAllocatedBytes = s.VRAMStartBytes, s.VRAMEndBytes, s.AllocatedBytes
			}
		}
	}
}

func gpus(ra, rb *attribution.Result) []GPU {
	idx := map[int]int{}
	var out []GPU
	get := func(index int, name string) *GPU {
		i, ok := idx[index]
		if !ok {
			i = len(out)
			idx[index] = i
			out = append(out, GPU{Index: index})
		}
		if out[i].Name == "" {
			out[i].Name = name
		}
		return &out[i]
	}
	if row := ra.Row(attribution.GPUCompute); row != nil {
		for _, g := range row.GPUs {
			dg := get(g.Index, g.Name)
			dg.AUtilMeanPct, dg.ABusyNS, dg.AVRAMPeakBytes, dg.ANS = g.Device.UtilMeanPct, g.BusyNS, g.Device.VRAMPeakBytes, g.NS
		}
	}
	if row := rb.Row(attribution.GPUCompute); row != nil {
		for _, g := range row.GPUs {
			dg := get(g.Index, g.Name)
			dg.BUtilMeanPct, dg.BBusyNS, dg.BVRAMPeakBytes, dg.BNS = g.Device.UtilMeanPct, g.BusyNS, g.Device.VRAMPeakBytes, g.NS
		}
	}
	slices.SortStableFunc(out, func(x, y GPU) int { return cmp.Compare(x.Index, y.Index) })
	if out == nil {
		out = []GPU{}
	}
	return out
}

func downloads(ra, rb *attribution.Result) []Download {
	var rows rowsByKey[Download]
	get := func(p string) *Download {
		return rows.get(p, func() Download { return Download{Path: p} })
	}
	if row := ra.Row(attribution.Download); row != nil {
		for _, x := range row.Downloads {
			dd := get(x.Path)
			dd.Name, dd.Cache = x.Name, x.Cache
			dd.ABytes, dd.ANS = dd.ABytes+x.Bytes, dd.ANS+x.NS
		}
	}
	if row := rb.Row(attribution.Download); row != nil {
		for _, x := range row.Downloads {
			dd := get(x.Path)
			dd.Name, dd.Cache = cmp.Or(dd.Name, x.Name), cmp.Or(dd.Cache, x.Cache)
			dd.BBytes, dd.BNS = dd.BBytes+x.Bytes, dd.BNS+x.NS
		}
	}
	out := rows.rows
	slices.SortStableFunc(out, func(x, y Download) int {
		return cmp.Or(cmp.Compare(absI(y.BNS-y.ANS), absI(x.BNS-x.ANS)), cmp.Compare(x.Path, y.Path))
	})
	if out == nil {
		out = []Download{}
	}
	return out
}

func warnings(a, b *record.Record) []string {
	var out []string
	if a == b || reflect.DeepEqual(a, b) {
		// Same file twice, or two copies of one run: every delta is 0.
		out = append(out, "A and B are one record (the same run twice): there is no difference to explain; give a cold and a warm record")
	}
	if a.Host.Hostname != b.Host.Hostname {
		out = append(out, fmt.Sprintf("A and B come from different hosts (%s, %s): disks, page cache and GPUs differ",
			cmp.Or(a.Host.Hostname, "?"), cmp.Or(b.Host.Hostname, "?")))
	} else if a.Host.Kernel != b.Host.Kernel && a.Host.Kernel != "" && b.Host.Kernel != "" {
		out = append(out, fmt.Sprintf("A and B ran on different kernels (%s, %s)", a.Host.Kernel, b.Host.Kernel))
	}
	if a.FillEnd != b.FillEnd && a.FillEnd != "" && b.FillEnd != "" {
		out = append(out, fmt.Sprintf("A and B ended fills differently (%s, %s): a read's CPU is not measured alike, so their disk reads differ by more than the disk",
			fillEndWords(a.FillEnd), fillEndWords(b.FillEnd)))
	}
	if ca, cb := strings.Join(a.Command, " "), strings.Join(b.Command, " "); !slices.Equal(a.Command, b.Command) {
		out = append(out, fmt.Sprintf("A and B ran different commands (%q, %q): the difference is not only the caches", ca, cb))
	}
	if a.User.Name != b.User.Name || a.User.Home != b.User.Home {
		out = append(out, fmt.Sprintf("A and B ran as different users (%s, %s): their cache directories differ",
			cmp.Or(a.User.Name, "?"), cmp.Or(b.User.Name, "?")))
	}
	if a.ExitCode != b.ExitCode {
		out = append(out, fmt.Sprintf("A exited %d and B exited %d: one of them may not have done the same work", a.ExitCode, b.ExitCode))
	}
	for _, s := range []struct {
		name string
		r    *record.Record
	}{{"A", a}, {"B", b}} {
		if n := s.r.Lost.Total(); n > 0 {
			out = append(out, fmt.Sprintf("%s lost %d events: its numbers are lower bounds", s.name, n))
		}
		if s.r.Interrupted {
			out = append(out, fmt.Sprintf("%s was interrupted before the command ended", s.name))
		}
	}
	if b.MadeCold != nil && a.MadeCold == nil {
		out = append(out, "B was made cold on purpose (--cold) and A was not: put the cold run first")
	}
	if a.MadeCold != nil && b.MadeCold != nil {
		out = append(out, "A and B were both made cold on purpose (--cold): neither shows the warm run")
	}
	if !a.Start.IsZero() && !b.Start.IsZero() && b.Start.Before(a.Start) {
		out = append(out, "B was recorded before A; put the earlier (cold) run first")
	}
	return out
}

// fillEndWords says how a record's fills ended (record.FillEnd).
func fillEndWords(end string) string {
	switch end {
	case record.FillEndTaskWork:
		return "at the return to user space"
	case record.FillEndReadExit:
		return "at the return where rseq shows it, else at the read syscalls' exits and the next look at the thread"
	case record.FillEndNextLook:
		return "at the next look at the thread, without the read exits"
	}
	return end
}

// CallSite is one call site's time in one category on both sides.
type CallSite struct {
	Category attribution.Category `json:"category"`
	// Site is "qualname (file.py:LINE)", the innermost frame of the
	// user's own code.
	Site    string `json:"site"`
	ANS     int64  `json:"a_ns"`
	BNS     int64  `json:"b_ns"`
	DeltaNS int64  `json:"delta_ns"`
}

func callSites(a, b *record.Record, ra, rb *attribution.Result) []CallSite {
	type key struct {
		c    attribution.Category
		site string
	}
	by := map[key]*CallSite{}
	get := func(c attribution.Category, site string) *CallSite {
		k := key{c, site}
		if by[k] == nil {
			by[k] = &CallSite{Category: c, Site: site}
		}
		return by[k]
	}
	for _, t := range attribution.CallSiteTimes(a, ra) {
		get(t.Category, t.Site).ANS += t.NS
	}
	for _, t := range attribution.CallSiteTimes(b, rb) {
		get(t.Category, t.Site).BNS += t.NS
	}
	out := make([]CallSite, 0, len(by))
	for _, c := range by {
		c.DeltaNS = c.BNS - c.ANS
		out = append(out, *c)
	}
	slices.SortFunc(out, func(x, y CallSite) int {
		return cmp.Or(cmp.Compare(absI(y.DeltaNS), absI(x.DeltaNS)), cmp.Compare(x.Category, y.Category), cmp.Compare(x.Site, y.Site))
	})
	return out
}
