// Package report renders a run record: the terminal summary, the JSON
// summary for scripts, and the exports.
package report

import (
	"encoding/json"
	"io"
	"sort"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// SummarySchema names the JSON summary format.
const SummarySchema = "coldtrace.summary/v1"

// Summary is the JSON document of `--json`. Keys documented in README.md
// keep their meaning across versions; new keys may be added.
type Summary struct {
	Schema     string           `json:"schema"`
	Command    []string         `json:"command"`
	ExitCode   int              `json:"exit_code"`
	Signal     string           `json:"signal,omitempty"`
	StartError string           `json:"start_error,omitempty"`
	WallNS     int64            `json:"wall_ns"`
	StartupNS  int64            `json:"startup_ns"`
	LostEvents uint64           `json:"lost_events"`
	Lost       record.Lost      `json:"lost"`
	User       record.User      `json:"user"`
	Files      []SummaryFile    `json:"files"`
	Processes  []SummaryProcess `json:"processes"`
	Warnings   []string         `json:"warnings,omitempty"`
	Self       record.SelfCost  `json:"coldtrace"`

	// From the attribution engine: all six categories, summing to WallNS.
	Breakdown       []BreakdownRow           `json:"breakdown"`
	Phases          []attribution.Phase      `json:"phases"`
	Verdict         string                   `json:"verdict"`
	Cold            bool                     `json:"cold"`
	WarmEstimateNS  int64                    `json:"warm_estimate_ns"`
	Attribution     *attribution.Result      `json:"attribution"`
	Caches          []SummaryCache           `json:"caches"`
	Compilers       []SummaryCompiler        `json:"compilers"`
	GPUs            []record.GPUSummary      `json:"gpus"`
	GPUUnavailable  string                   `json:"gpu_unavailable,omitempty"`
	GPUInterference []record.GPUInterference `json:"gpu_interference"`
}

// BreakdownRow is one category's share of the wall time.
type BreakdownRow struct {
	Category string  `json:"category"`
	NS       int64   `json:"ns"`
	Pct      int     `json:"pct"`
	Share    float64 `json:"share"`
}

// SummaryFile is one file's page-cache story.
type SummaryFile struct {
	Path          string  `json:"path"`
	SizeBytes     int64   `json:"size_bytes"`
	PagesAccessed uint64  `json:"pages_accessed"`
	PagesMissed   uint64  `json:"pages_missed"`
	PagesEvicted  uint64  `json:"pages_evicted"`
	PagesCreated  uint64  `json:"pages_created"`
	HitRatio      float64 `json:"hit_ratio"`
	BytesFromDisk uint64  `json:"bytes_from_disk"`
	IOWaitNS      int64   `json:"io_wait_ns"`
	MissCPUNS     int64   `json:"miss_cpu_ns"`
}

// SummaryProcess is one process's time.
type SummaryProcess struct {
	PID        int32    `json:"pid"`
	PPID       int32    `json:"ppid"`
	Comm       string   `json:"comm"`
	Args       []string `json:"args,omitempty"`
	ExitCode   int      `json:"exit_code"`
	StartNS    int64    `json:"start_ns"`
	EndNS      int64    `json:"end_ns"`
	CPUNS      int64    `json:"cpu_ns"`
	OffCPUNS   int64    `json:"offcpu_ns"`
	IOWaitNS   int64    `json:"io_wait_ns"`
	MissCPUNS  int64    `json:"miss_cpu_ns"`
	RunQueueNS int64    `json:"runqueue_ns"`
}

// hitRatio is the share of accessed pages that came from the cache. A
// read that missed is usually also counted as accessed; where misses
// exceed accesses (readahead beyond what was read) the ratio is 0.
func hitRatio(f record.File) float64 {
	if f.PagesAccessed == 0 {
		if f.PagesMissed == 0 {
			return 1
		}
		return 0
	}
	if f.PagesMissed >= f.PagesAccessed {
		return 0
	}
	return 1 - float64(f.PagesMissed)/float64(f.PagesAccessed)
}

// filesByCost orders files by what they cost the run: I/O wait plus the
// kernel time of filling the cache, then bytes from disk.
func filesByCost(files []record.File) []record.File {
	out := append([]record.File(nil), files...)
	sort.SliceStable(out, func(i, j int) bool {
		ci, cj := out[i].IOWaitNS+out[i].MissCPUNS, out[j].IOWaitNS+out[j].MissCPUNS
		if ci != cj {
			return ci > cj
		}
		if out[i].BytesFromDisk != out[j].BytesFromDisk {
			return out[i].BytesFromDisk > out[j].BytesFromDisk
		}
		return out[i].PagesAccessed > out[j].PagesAccessed
	})
	return out
}

// NewSummary builds the JSON summary of r; res is its attribution
// (computed when nil).
func NewSummary(r *record.Record, res *attribution.Result) *Summary {
	if res == nil {
		res = attribution.Analyze(r)
	}
	s := &Summary{Schema: SummarySchema, Command: r.Command, ExitCode: r.ExitCode, Signal: r.Signal,
		StartError: r.StartError, WallNS: r.WallNS, StartupNS: r.StartupNS, LostEvents: r.Lost.Total(),
		Lost: r.Lost, User: r.User, Warnings: r.Warnings, Self: r.Self,
		Files: []SummaryFile{}, Processes: []SummaryProcess{}}
	for _, f := range filesByCost(r.Files) {
		s.Files = append(s.Files, SummaryFile{Path: f.Path, SizeBytes: f.SizeBytes, PagesAccessed: f.PagesAccessed,
			PagesMissed: f.PagesMissed, PagesEvicted: f.PagesEvicted, PagesCreated: f.PagesCreated, HitRatio: hitRatio(f),
			BytesFromDisk: f.BytesFromDisk, IOWaitNS: f.IOWaitNS, MissCPUNS: f.MissCPUNS})
	}
	for _, p := range r.Processes {
		s.Processes = append(s.Processes, SummaryProcess{PID: p.PID, PPID: p.PPID, Comm: p.Comm, Args: p.Args,
			ExitCode: p.ExitCode, StartNS: p.StartNS, EndNS: p.EndNS, CPUNS: p.CPUNS, OffCPUNS: p.OffCPUNS,
			IOWaitNS: p.IOWaitNS, MissCPUNS: p.MissCPUNS, RunQueueNS: p.RunQueueNS})
	}
	for _, row := range res.Breakdown {
		s.Breakdown = append(s.Breakdown, BreakdownRow{Category: string(row.Category), NS: row.NS, Pct: row.Pct, Share: row.Share})
	}
	s.Phases, s.Verdict, s.Cold, s.WarmEstimateNS, s.Attribution = res.Phases, res.Verdict, res.Cold, res.WarmEstimateNS, res
	s.Caches = append([]SummaryCache{}, SummaryCaches(r)...)
	s.Compilers = append([]SummaryCompiler{}, SummaryCompilers(r)...)
	s.GPUs = []record.GPUSummary{}
	s.GPUInterference = []record.GPUInterference{}
	if r.GPU != nil {
		s.GPUUnavailable = r.GPU.Unavailable
		s.GPUs = append(s.GPUs, r.GPU.Summaries()...)
		s.GPUInterference = append(s.GPUInterference, r.GPU.Interference...)
	}
	return s
}

// WriteJSON writes the summary of r as indented JSON.
func WriteJSON(w io.Writer, r *record.Record, res *attribution.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(NewSummary(r, res))
}
