package abtest

import (
	"math/rand/v2"
	"regexp"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// The report of a whole bench as data: what was run, each run and the
// judgement. trace/abrun fills it; report/bench renders it.

// Command is one of the two commands of a bench.
type Command struct {
	Argv []string `json:"argv"`
	// Prepare runs before each of this side's runs (after the common one).
	Prepare []string `json:"prepare,omitempty"`
	// Cold: before each run, evict the files every earlier run read and
	// point JIT caches at fresh directories.
	Cold bool `json:"cold,omitempty"`
}

// Plan is a whole bench.
type Plan struct {
	A, B    Command
	Pairs   int
	Warmup  int
	Shuffle bool
	Seed    uint64
	// Prepare runs before every run, warm-ups included.
	Prepare    []string
	KeepGoing  bool
	SameOutput bool
	Expect     *regexp.Regexp
	// BusyCPU (CPUs) and BusyIO (bytes/s) are the interference
	// thresholds: a run whose other processes used more, on average, is
	// flagged.
	BusyCPU float64
	BusyIO  float64
}

// Order is the run order of the counted runs: A B A B … A (every B
// between two As), or with shuffle the same runs in a random order that
// still starts and ends with an A.
func (p Plan) Order() []Side {
	var out []Side
	for i := 0; i < p.Pairs; i++ {
		out = append(out, A, B)
	}
	out = append(out, A)
	if p.Shuffle && len(out) > 2 {
		r := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
		mid := out[1 : len(out)-1]
		r.Shuffle(len(mid), func(i, j int) { mid[i], mid[j] = mid[j], mid[i] })
	}
	return out
}

// RunReport is one run of the bench, warm-ups included.
type RunReport struct {
	// N counts every run from 1; Index counts the counted runs from 1
	// (0 for a warm-up).
	N          int    `json:"n"`
	Index      int    `json:"index,omitempty"`
	Side       Side   `json:"side"`
	Warmup     bool   `json:"warmup,omitempty"`
	Status     Status `json:"status,omitempty"`
	Interfered bool   `json:"interfered,omitempty"`
	Cold       *Cold  `json:"cold,omitempty"`
	ExpectMiss bool   `json:"expect_missed,omitempty"`
	*Result
}

// Report is a finished (or stopped) bench.
type Report struct {
	Plan    Plan        `json:"-"`
	Runs    []RunReport `json:"runs"`
	Summary Summary     `json:"summary"`
	// OutputsDiffer is set when the counted runs' stdout hashes differ.
	OutputsDiffer bool `json:"outputs_differ"`
	// Stopped says why the bench ended early; empty when it ran through.
	Stopped string `json:"stopped,omitempty"`
}

// Judge runs the statistics over the counted runs and records each run's
// status.
func (rep *Report) Judge() {
	var runs []Run
	var idx []int
	hashes := map[string]bool{}
	for i, rr := range rep.Runs {
		if rr.Warmup {
			continue
		}
		runs = append(runs, Run{
			Side: rr.Side, WallNS: rr.WallNS, SysNS: rr.SysNS, Split: rr.Split,
			Failed: rr.ExitCode != 0, Interfered: rr.Interfered,
		})
		idx = append(idx, i)
		if rr.ExitCode == 0 {
			hashes[rr.StdoutSHA256] = true
		}
	}
	rep.Summary = Analyze(runs, Options{})
	for k, i := range idx {
		rep.Runs[i].Status = rep.Summary.Status[k]
	}
	// The seed's check: both sides must print the same thing.
	rep.OutputsDiffer = len(hashes) > 1
}

// Interference is what processes outside the traced tree did during one
// run, sampled every second (and at the run's start and end, so a short
// run has one interval too).
type Interference struct {
	Samples int `json:"samples"`
	// CPUMean is the CPUs used by other processes over the run (1.0: one
	// CPU busy all the time); CPUPeak the highest of one interval.
	CPUMean float64 `json:"cpu_mean"`
	CPUPeak float64 `json:"cpu_peak"`
	// IOBytes is block I/O other processes caused (their /proc/PID/io).
	IOBytes   uint64  `json:"io_bytes"`
	IORate    float64 `json:"io_bytes_per_sec"`
	Top       []Busy  `json:"top,omitempty"`
	GPUOthers []Busy  `json:"gpu_others,omitempty"`
}

// Busy is one process outside the traced tree that used the CPU.
type Busy struct {
	PID  int     `json:"pid"`
	Comm string  `json:"comm"`
	CPUs float64 `json:"cpus"` // mean CPUs used over the run
}

// Result is one traced run.
type Result struct {
	Record   *record.Record      `json:"-"`
	Analysis *attribution.Result `json:"-"`
	WallNS   int64               `json:"wall_ns"`
	UserNS   int64               `json:"user_ns"`
	SysNS    int64               `json:"sys_ns"`
	ExitCode int                 `json:"exit_code"`
	// PeakRSSBytes is the largest sum of the tree's resident memory at
	// one sample; 0 when the run ended before the first sample.
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
	// VRAMPeakBytes is the traced processes' GPU memory at its peak, when
	// NVML reported it.
	VRAMPeakBytes uint64            `json:"vram_peak_bytes,omitempty"`
	StdoutSHA256  string            `json:"stdout_sha256"`
	StdoutBytes   int64             `json:"stdout_bytes"`
	Stdout        []byte            `json:"-"`
	Stderr        []byte            `json:"-"`
	Split         attribution.Split `json:"-"`
	// Categories is Split by name, for JSON.
	Categories   map[attribution.Category]int64 `json:"categories"`
	Interference Interference                   `json:"interference"`
}

// Matches reports whether re matches the run's stdout or stderr.
func (r *Result) Matches(re *regexp.Regexp) bool {
	return re.Match(r.Stdout) || re.Match(r.Stderr)
}

// Cold is what one cold run was given.
type Cold struct {
	// EvictedBytes is what went from the page cache; Kept counts pages
	// that could not go (mapped by a running process, say).
	EvictedBytes int64    `json:"evicted_bytes"`
	Files        int      `json:"files"`
	KeptPages    uint64   `json:"kept_pages,omitempty"`
	Problems     []string `json:"problems,omitempty"`
	// Env points the JIT caches at fresh, empty directories.
	Env []string `json:"env,omitempty"`
}
