package attribution

import (
	"math"
	"sort"

	"github.com/coldtrace/coldtrace/record"
)

// Rule names the overlap rule this package implements; it is written into
// every result so that a saved summary says how it was computed.
const Rule = "slice-priority/v1"

// Options tune the analysis. The zero value gives the defaults.
type Options struct {
	// MinPhaseNS is the shortest phase kept; shorter runs of slices are
	// absorbed into a neighbour. 0 means max(2×IntervalNS, WallNS/100).
	MinPhaseNS int64
	// CompilerNames are process names treated as compilers, beside the
	// built-in list and the compilers the record's JIT section names.
	CompilerNames []string
}

// Result is the attribution of one run.
type Result struct {
	WallNS     int64  `json:"wall_ns"`
	IntervalNS int64  `json:"interval_ns"`
	Rule       string `json:"rule"`
	// Breakdown has one row per category, in [Categories] order; the rows'
	// NS sum exactly to WallNS.
	Breakdown []Row `json:"breakdown"`
	// Phases are contiguous, in time order, and cover [0, WallNS].
	Phases []Phase `json:"phases"`
	// Verdict judges the run, as data (report/words says it).
	Verdict Verdict `json:"verdict"`
	// Cold is set when the cold rule holds (Verdict.Kind is
	// VerdictCold; Verdict.ColdBy says why).
	Cold bool `json:"cold"`
	// WarmEstimateNS is what a rerun with every cache warm should take:
	// the wall time less the avoidable categories, less nothing of the CPU
	// or GPU work they hid (see docs/attribution.md).
	WarmEstimateNS int64 `json:"warm_estimate_ns"`
	// RereadNS is the disk_read time of pages read again after their
	// eviction during the run: a rerun reads them again, so the warm
	// estimate keeps it.
	RereadNS int64 `json:"reread_ns,omitempty"`
	// RecurringNS is the disk_read time a rerun pays again whatever the
	// page cache holds: waits on direct I/O (which bypasses it), I/O
	// waits outside any page-cache fill, and the reads of files read on
	// every run (Recurring: FUSE). The warm estimate keeps it, and it is
	// no part of the verdict's avoidable time.
	RecurringNS int64 `json:"recurring_ns,omitempty"`
	// NotKeptNS is the jit_compile time of processes whose cache entries
	// were not kept (NotKeptPIDs: a rename, unlink or open under a cache
	// root failed): a rerun compiles it again, so the warm estimate keeps
	// it, and it is no part of the verdict's avoidable time.
	NotKeptNS int64 `json:"not_kept_ns,omitempty"`
	// UnobservedNS is wall time no sample covered (after the last sample,
	// or all of a run without samples); it is counted as other_wait unless
	// a wall-clock signal (GPU, download) covers it.
	UnobservedNS int64 `json:"unobserved_ns"`
	// AfterExitNS is thread time (on CPU, I/O wait, run queue) that
	// processes spent after the command exited; it is outside the
	// breakdown.
	AfterExitNS int64 `json:"after_exit_thread_ns,omitempty"`
	// Notes are caveats for the reader: lost events, unobserved time,
	// an interrupted run; as data, like the verdict.
	Notes []Note `json:"notes,omitempty"`
	// Slices is the per-interval split the breakdown and phases were built
	// from, for timeline renderers. It is left out of JSON.
	Slices []Slice `json:"-"`
}

// Row is one category of the breakdown with its evidence. Evidence lists
// are sorted by weight (their NS), heaviest first, and their NS sum to the
// row's NS where the row has any signal.
type Row struct {
	Category Category `json:"category"`
	NS       int64    `json:"ns"`
	// Share is NS/WallNS.
	Share float64 `json:"share"`
	// Pct is Share in whole percent; the six rows' Pct sum to 100.
	Pct int `json:"pct"`
	// SignalNS is the overlapping resource total behind the row, before
	// the partition: thread-time for disk_read, jit_compile, cpu and
	// other_wait (explicit waits only), busy time for gpu_compute, fetch
	// time for download. It can exceed NS and WallNS.
	SignalNS  int64              `json:"signal_ns"`
	Files     []FileEvidence     `json:"files,omitempty"`
	Compilers []CompilerEvidence `json:"compilers,omitempty"`
	Caches    []CacheEvidence    `json:"caches,omitempty"`
	GPUs      []GPUEvidence      `json:"gpus,omitempty"`
	Downloads []DownloadEvidence `json:"downloads,omitempty"`
	Processes []ProcessEvidence  `json:"processes,omitempty"`
}

// Slice is the wall time (StartNS, EndNS] split by category.
type Slice struct {
	StartNS int64
	EndNS   int64
	Split   Split
	// Observed is false for time no sample covered.
	Observed bool
}

// Row returns the breakdown row of c.
func (r *Result) Row(c Category) *Row {
	for i := range r.Breakdown {
		if r.Breakdown[i].Category == c {
			return &r.Breakdown[i]
		}
	}
	return nil
}

// Analyze attributes r's wall time with the default options.
//
// The rule: the run is cut into slices at the samples' end times (the
// first slice starts at 0, a last one runs from the final sample to
// WallNS). Inside a slice of wall length D, the categories in the order
// disk_read, jit_compile, download, gpu_compute, cpu each take
// min(what is left of D, their signal in the slice) and other_wait takes
// the rest. Signals: disk_read is thread I/O wait plus miss CPU;
// jit_compile is the on-CPU and run-queue time of compiler processes (and
// their descendants) and of processes inside a JIT window; download is the
// wall time some download was in flight; gpu_compute is the busiest GPU's
// utilisation times the slice; cpu is the remaining on-CPU and run-queue
// thread time.
func Analyze(r *record.Record) *Result { return Options{}.Analyze(r) }

// Analyze attributes r's wall time; see the package-level Analyze.
func (o Options) Analyze(r *record.Record) *Result {
	if r == nil {
		r = &record.Record{}
	}
	a := newAnalyzer(r, o)
	return a.run()
}

// rawSlice is a slice before attribution: the samples whose deltas fall
// into it, scaled by scale when the slice was clipped at WallNS.
type rawSlice struct {
	start, end int64
	samples    []*record.Sample
	scale      float64
}

type srcKey struct{ kind, name string }

type analyzer struct {
	r     *record.Record
	opt   Options
	wall  int64
	procs map[int32]*record.Process
	// compiler maps the pid of a compiler process, or of a descendant of
	// one, to the name its compile time is filed under.
	compiler map[int32]string
	windows  map[int32]*pidWindows
	gpus     []*devTimeline
	gpuSums  []record.GPUSummary
	dls      []dlSpan
	dlUnion  []span
	dlCursor int
	// dlKept is the union of the downloads a warm rerun would not repeat
	// (Persistence), with its own cursor.
	dlKept       []span
	dlKeptCursor int

	// Run-wide evidence, in wall ns.
	files                         tally[int]
	diskProcs, jitProcs, cpuProcs tally[int32]
	jitSrc                        tally[srcKey]
	gpuDev                        tally[int]
	dlPath                        tally[string]

	// Per-slice scratch.
	sFiles                           tally[int]
	sDiskProcs, sJITProcs, sCPUProcs tally[int32]
	sJITSrc                          tally[srcKey]
	sGPU                             tally[int]
	sDL                              tally[string]
	jitSeen                          map[int32]*jitInfo

	signal     [numCategories]float64
	total      Split
	warm       int64
	unobserved int64
	afterExit  float64
	slices     []Slice
}

func newAnalyzer(r *record.Record, o Options) *analyzer {
	a := &analyzer{r: r, opt: o, wall: max(r.WallNS, 0), jitSeen: map[int32]*jitInfo{}}
	a.procs = make(map[int32]*record.Process, len(r.Processes))
	for i := range r.Processes {
		p := &r.Processes[i]
		if _, dup := a.procs[p.PID]; !dup {
			a.procs[p.PID] = p
		}
	}
	a.compiler = findCompilers(r, o.CompilerNames)
	a.windows = buildWindows(r, a.wall)
	a.gpuSums = r.GPU.Summaries()
	a.gpus = buildGPU(r.GPU, a.gpuSums, a.wall)
	a.dls, a.dlUnion, a.dlKept = buildDownloads(r, a.wall)
	return a
}

func (a *analyzer) run() *Result {
	for _, rs := range a.cut() {
		a.attribute(rs)
	}
	res := &Result{
		WallNS:         a.wall,
		IntervalNS:     a.r.IntervalNS,
		Rule:           Rule,
		UnobservedNS:   a.unobserved,
		AfterExitNS:    int64(math.Round(a.afterExit)),
		WarmEstimateNS: a.warm,
		Slices:         a.slices,
	}
	if res.Slices == nil {
		res.Slices = []Slice{}
	}
	res.Breakdown = a.breakdown()
	res.RereadNS = rereadNS(a.r, res.Row(DiskRead))
	res.RecurringNS = min(res.Row(DiskRead).NS, recurringDiskNS(res.Row(DiskRead))+fuseRecurringNS(a.r, res.Row(DiskRead)))
	res.NotKeptNS = a.notKeptNS(res.Row(JITCompile))
	res.WarmEstimateNS = min(a.wall, res.WarmEstimateNS+res.RereadNS+res.RecurringNS+res.NotKeptNS)
	res.Phases = phases(a.slices, a.minPhase())
	res.Verdict = verdict(res, coldBy(a.r, res))
	res.Verdict.Memory = memoryCause(a.r, res)
	res.Verdict.Contention = contention(a.r, res)
	res.Cold = res.Verdict.Kind == VerdictCold
	res.Notes = a.notes(res)
	return res
}

func (a *analyzer) minPhase() int64 {
	if a.opt.MinPhaseNS > 0 {
		return a.opt.MinPhaseNS
	}
	return max(2*a.r.IntervalNS, a.wall/100)
}

// cut tiles [0, WallNS] with slices at the samples' end times. Samples are
// taken in time order (stable for equal times). A sample that ends at or
// before the previous cut adds its deltas to the slice before it (or the
// next one, before the first cut); one that straddles WallNS is clipped and
// its deltas scaled to the part inside; ones wholly after WallNS only count
// toward AfterExitNS.
func (a *analyzer) cut() []rawSlice {
	samples := make([]*record.Sample, len(a.r.Samples))
	for i := range a.r.Samples {
		samples[i] = &a.r.Samples[i]
	}
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].EndNS < samples[j].EndNS })

	var out []rawSlice
	var pending []*record.Sample
	prev := int64(0)
	for _, s := range samples {
		if prev >= a.wall {
			a.afterExit += activeNS(s)
			continue
		}
		end := s.EndNS
		if end <= prev {
			if n := len(out); n > 0 {
				out[n-1].samples = append(out[n-1].samples, s)
			} else {
				pending = append(pending, s)
			}
			continue
		}
		scale := 1.0
		if end > a.wall {
			scale = float64(a.wall-prev) / float64(end-prev)
			a.afterExit += (1 - scale) * activeNS(s)
			end = a.wall
		}
		out = append(out, rawSlice{start: prev, end: end, samples: append(pending, s), scale: scale})
		pending = nil
		prev = end
	}
	if prev < a.wall {
		// No sample covers (prev, WallNS]: the tracer's last poll came
		// before the exit. Samples that ended at or before 0 and found
		// no slice land here too.
		out = append(out, rawSlice{start: prev, end: a.wall, samples: pending, scale: 1})
		if len(pending) == 0 {
			a.unobserved += a.wall - prev
		}
	}
	return out
}

// unexplainedDisk files a slice's disk time no file delta explains (rest):
// the I/O wait no file's fill or direct read took (io) under
// OutsidePageCacheID, the remainder under file -1.
func (a *analyzer) unexplainedDisk(rest, io float64) {
	if rest <= 0.5 {
		return
	}
	outside := min(rest, max(io, 0))
	if outside > 0.5 {
		a.sFiles.add(OutsidePageCacheID, outside)
		rest -= outside
	}
	if rest > 0.5 {
		a.sFiles.add(-1, rest)
	}
}

func activeNS(s *record.Sample) float64 {
	var t int64
	for _, td := range s.Threads {
		t += pos(td.CPUNS) + pos(td.IOWaitNS) + pos(td.RunQueueNS)
	}
	return float64(t)
}

func pos(v int64) int64 { return max(v, 0) }

// attribute applies the rule to one slice and files its evidence.
func (a *analyzer) attribute(rs rawSlice) {
	d := rs.end - rs.start
	var sig [numCategories]float64
	a.sFiles.reset()
	a.sDiskProcs.reset()
	a.sJITProcs.reset()
	a.sCPUProcs.reset()
	a.sJITSrc.reset()
	a.sGPU.reset()
	a.sDL.reset()
	clear(a.jitSeen)

	var fileSum, threadIO, fileIO float64
	for _, s := range rs.samples {
		for _, td := range s.Threads {
			cpu := pos(td.CPUNS)
			miss := min(pos(td.MissCPUNS), cpu)
			// Waits inside a fill (run queue, other blocking) belong to
			// the fill: a warm read would not have waited.
			runq, wait := pos(td.RunQueueNS), pos(td.OtherWaitNS)
			fillRunq := min(pos(td.FillRunQueueNS), runq)
			fillWait := min(pos(td.FillWaitNS)-fillRunq, wait)
			fillWait = max(fillWait, 0)
			disk := float64(pos(td.IOWaitNS)+miss+fillRunq+fillWait) * rs.scale
			run := float64(cpu-miss+runq-fillRunq) * rs.scale
			sig[iOther] += float64(wait-fillWait) * rs.scale
			sig[iDisk] += disk
			threadIO += float64(pos(td.IOWaitNS)) * rs.scale
			a.sDiskProcs.add(td.PID, disk)

			var jit float64
			if name, ok := a.compiler[td.PID]; ok {
				jit = run
				a.sJITSrc.add(srcKey{"compiler", name}, jit)
			} else if ji := a.jitFor(td.PID, rs.start, rs.end); ji != nil && ji.frac > 0 {
				// A compile is CPU-bound: the thread's time in the slice
				// counts as compile up to the windows' length in it (a
				// pro-rata share would split a busy window with idle time).
				jit = min(run, ji.frac*float64(rs.end-rs.start))
				for i, k := range ji.src.keys {
					a.sJITSrc.add(k, jit*ji.src.vals[i]/ji.srcSum)
				}
			}
			sig[iJIT] += jit
			a.sJITProcs.add(td.PID, jit)
			sig[iCPU] += run - jit
			a.sCPUProcs.add(td.PID, run-jit)
		}
		for _, fd := range s.Files {
			w := float64(pos(fd.IOWaitNS)+pos(fd.MissCPUNS)+pos(fd.FillWaitNS)) * rs.scale
			a.sFiles.add(fd.File, w)
			fileSum += max(w, 0)
			fileIO += float64(pos(fd.IOWaitNS)) * rs.scale
		}
	}
	a.unexplainedDisk(sig[iDisk]-fileSum, threadIO-fileIO)
	var dlKept float64
	sig[iDownload], dlKept = a.downloadIn(rs.start, rs.end)
	sig[iGPU] = a.gpuIn(rs.start, rs.end)

	var split Split
	rem := d
	for _, i := range priority {
		take := min(rem, int64(math.Round(sig[i])))
		split[i] = take
		rem -= take
	}
	split[iOther] = rem

	// A warm rerun skips the avoidable time but still does the CPU and
	// GPU work that the rule pushed out of this slice. It downloads again
	// what did not land in a persistent cache: of the slice's download
	// time, only the share during which a kept download was in flight is
	// avoided.
	avoid := split[iDisk] + split[iJIT]
	if sig[iDownload] > 0 {
		avoid += int64(math.Round(float64(split[iDownload]) * min(dlKept/sig[iDownload], 1)))
	}
	demand := min(d, int64(math.Round(max(sig[iGPU], sig[iCPU]))))
	pushed := max(0, demand-split[iGPU]-split[iCPU])
	a.warm += d - avoid + min(avoid, pushed)

	a.sFiles.spread(&a.files, split[iDisk])
	a.sDiskProcs.spread(&a.diskProcs, split[iDisk])
	a.sJITSrc.spread(&a.jitSrc, split[iJIT])
	a.sJITProcs.spread(&a.jitProcs, split[iJIT])
	a.sCPUProcs.spread(&a.cpuProcs, split[iCPU])
	a.sGPU.spread(&a.gpuDev, split[iGPU])
	a.sDL.spread(&a.dlPath, split[iDownload])

	for i := range sig {
		a.signal[i] += sig[i]
		a.total[i] += split[i]
	}
	a.slices = append(a.slices, Slice{StartNS: rs.start, EndNS: rs.end, Split: split, Observed: len(rs.samples) > 0})
}
