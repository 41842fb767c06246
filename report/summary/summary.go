package summary

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/internal/jsonindent"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/segments"
	"github.com/coldtrace/coldtrace/report/words"
)

// Schema names the JSON summary format.
const Schema = "coldtrace.summary/v1"

// Summary is the JSON document of `--json`. Its keys keep their meaning
// across versions; new keys may be added.
type Summary struct {
	Schema     string   `json:"schema"`
	Command    []string `json:"command"`
	ExitCode   int      `json:"exit_code"`
	Signal     string   `json:"signal,omitempty"`
	StartError string   `json:"start_error,omitempty"`
	// Interrupted is set when coldtrace itself was stopped before the
	// command ended on its own: the numbers cover the part that ran.
	Interrupted bool        `json:"interrupted"`
	WallNS      int64       `json:"wall_ns"`
	StartupNS   int64       `json:"startup_ns"`
	LostEvents  uint64      `json:"lost_events"`
	Lost        record.Lost `json:"lost"`
	// FillEnd is how the kernel side ended fills (record.FillEnd).
	FillEnd   string      `json:"fill_end,omitempty"`
	User      record.User `json:"user"`
	Files     []File      `json:"files"`
	Processes []Process   `json:"processes"`
	// Stacks are the Python stacks processes were started from, interned
	// (Process.Stack), innermost frame first.
	Stacks   []record.PyStack `json:"stacks,omitempty"`
	Warnings []string         `json:"warnings,omitempty"`
	Self     record.SelfCost  `json:"coldtrace"`
	// MadeCold says how coldtrace made the run cold on purpose (run
	// --cold); null for a run left as it was.
	MadeCold *record.MadeCold `json:"made_cold"`

	// Partial is set when the record is a checkpoint written during the
	// run: the numbers end at Partial.AtNS and ExitCode means nothing.
	Partial *record.Partial `json:"partial,omitempty"`

	// Coarsened is set when a long run's later timeline samples each sum
	// several polls: the totals above are exact, only the timeline (and
	// anything read off it, such as phases) is coarser from FromNS on.
	Coarsened *record.Coarsening `json:"coarsened,omitempty"`

	// Labels are the run's --label pairs (host, rank, job, …).
	Labels map[string]string `json:"labels,omitempty"`

	// From the attribution engine: all six categories, summing to WallNS.
	Breakdown []Row               `json:"breakdown"`
	Phases    []attribution.Phase `json:"phases"`
	Verdict   string              `json:"verdict"`
	// Label is the verdict's label: "cold (read 144.0 MiB from disk in
	// 30ms)", "warm".
	Label          string `json:"label"`
	Cold           bool   `json:"cold"`
	WarmEstimateNS int64  `json:"warm_estimate_ns"`
	// RecurringNS is the disk time a rerun pays again whatever the page
	// cache holds (attribution.Result's): direct I/O, I/O outside it.
	RecurringNS int64 `json:"recurring_ns,omitempty"`
	// NotKeptNS is the compile time a rerun pays again because its cache
	// entries were not kept (attribution.Result's).
	NotKeptNS       int64                    `json:"not_kept_ns,omitempty"`
	Attribution     *Attribution             `json:"attribution"`
	Caches          []record.Cache           `json:"caches"`
	Compilers       []record.Compiler        `json:"compilers"`
	GPUs            []record.GPUSummary      `json:"gpus"`
	GPUUnavailable  string                   `json:"gpu_unavailable,omitempty"`
	GPUInterference []record.GPUInterference `json:"gpu_interference"`
	Downloads       []Download               `json:"downloads"`
	// Machine is what the machine let the run use and what else ran.
	Machine *record.Machine `json:"machine,omitempty"`

	// Attached is set for coldtrace attach: the trace began in running
	// processes, and what they did before is not known.
	Attached *record.Attached `json:"attached,omitempty"`
	// Marks and Segments: the run cut at its marks (coldtrace mark,
	// COLDTRACE_MARK, attach --split-idle), each segment with its own
	// breakdown; absent for an unmarked run.
	Marks    []record.Mark   `json:"marks,omitempty"`
	Segments []segments.JSON `json:"segments,omitempty"`
	// Untraced are the processes that left the trace at a secure exec
	// (a setuid program run under sudo), with when and why.
	Untraced []record.Untraced `json:"untraced,omitempty"`

	// From attribution/advice: why caches missed, what to persist, how
	// files were read, compiles with no cache, ranked next steps.
	CacheMisses []advice.CacheMiss      `json:"cache_misses"`
	Persist     []advice.Persist        `json:"persist"`
	Reads       []advice.FileRead       `json:"reads"`
	NoCache     []advice.NoCacheCompile `json:"no_cache"`
	Advice      []advice.Action         `json:"advice"`
	// CompilesAfterReady are the compiles that started after the program
	// was ready (advice.AfterReady).
	CompilesAfterReady *advice.LateCompiles `json:"compiles_after_ready,omitempty"`
	// RecurringReads are files read again on every run (advice.Recurring).
	RecurringReads []advice.RecurringRead `json:"recurring_reads,omitempty"`
	// SlowFSReads are files on network or FUSE filesystems filled by
	// many small requests (advice.SlowFS).
	SlowFSReads []advice.SlowFSRead `json:"slow_fs_reads,omitempty"`
	// DownloadStalls are the stretches in which a download received
	// nothing, or next to nothing (advice.Stalls).
	DownloadStalls []advice.DownloadStall `json:"download_stalls,omitempty"`
	// SilentConnections are the connections that received nothing for
	// 10 s or more while their process waited (advice.SilentWaits).
	SilentConnections []advice.SilentWait `json:"silent_connections,omitempty"`
	// SlowDNS are the downloads whose host name took a second or more to
	// resolve (advice.SlowLookups).
	SlowDNS []advice.SlowLookup `json:"slow_dns,omitempty"`
	// BrokenCaches are the caches that did not keep what the run compiled
	// (advice.BrokenCaches).
	BrokenCaches []advice.BrokenCache `json:"broken_caches,omitempty"`
	// CacheCandidates are directories this run filled that may be
	// caches the registry does not know (advice.MayBeCaches).
	CacheCandidates []advice.CacheCandidate `json:"cache_candidates,omitempty"`
}

// Download is one network fetch (the summary's "downloads[]").
type Download struct {
	// Path is the destination file, "" for data kept in memory; Name what
	// it is known by ("model.safetensors").
	Path    string  `json:"path"`
	Name    string  `json:"name"`
	Cache   string  `json:"cache,omitempty"`
	Bytes   uint64  `json:"bytes"`
	StartNS int64   `json:"start_ns"`
	EndNS   int64   `json:"end_ns"`
	MBPerS  float64 `json:"mb_per_s"`
	Peer    string  `json:"peer"`
	Host    string  `json:"host,omitempty"`
	// HostFrom says where Host came from (record.Download's HostFrom).
	HostFrom string `json:"host_from,omitempty"`
	PID      int32  `json:"pid"`
	// OnCPUNS and WaitNS are the receiving thread's time within the
	// download, on CPU and waiting for data.
	OnCPUNS int64 `json:"on_cpu_ns"`
	WaitNS  int64 `json:"wait_ns"`
	// Fate says whether a warm rerun fetches it again (attribution.Fate:
	// "kept", "memory", "deleted", "volatile", "container_layer",
	// "no_cache", "not_seen", "name_unknown").
	Fate attribution.Fate `json:"fate"`
	// Files are the files it was written to: its destination first.
	Files []record.DownloadFile `json:"files"`
	// KeptIn is the record's (record.Download): the file of a known
	// cache that holds the body beside a destination outside any.
	KeptIn *record.DownloadFile `json:"kept_in,omitempty"`
	// Destination, Expansion, Connections, Candidates and Unlisted are
	// the record's (record.Download): where the body went, how many
	// times larger it was written, the connections that fed it, the
	// files written meanwhile when none was its destination, and
	// whether it was not seen because its process's open files were
	// never listed while it received.
	Destination string                      `json:"destination,omitempty"`
	Expansion   float64                     `json:"expansion,omitempty"`
	Connections []record.DownloadConnection `json:"connections,omitempty"`
	Candidates  []record.DownloadFile       `json:"candidates,omitempty"`
	Unlisted    bool                        `json:"unlisted,omitempty"`
}

// Attribution is the attribution result with its verdict and notes said
// in words, as v1 has them (strings); VerdictData is the verdict as data.
type Attribution struct {
	*attribution.Result
	Verdict     string              `json:"verdict"`
	Notes       []string            `json:"notes,omitempty"`
	VerdictData attribution.Verdict `json:"verdict_data"`
}

// Row is one category's share of the wall time.
type Row struct {
	Category string  `json:"category"`
	NS       int64   `json:"ns"`
	Pct      int     `json:"pct"`
	Share    float64 `json:"share"`
}

// File is one file's page-cache story.
type File struct {
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
	// What the machine did to the file (record.File).
	FillWaitNS  int64  `json:"fill_wait_ns"`
	PagesReread uint64 `json:"pages_reread"`
	PagesShared uint64 `json:"pages_shared"`
	// Direct I/O of the file, which bypasses the page cache (record.File).
	DirectBytes  uint64            `json:"direct_bytes,omitempty"`
	DirectWaitNS int64             `json:"direct_wait_ns,omitempty"`
	Evictors     []record.Evictor  `json:"evictors,omitempty"`
	Inserters    []record.Inserter `json:"inserters,omitempty"`
	// HostPath is the host's path when Path is the one a process used in
	// a mount namespace of its own, or through a bind mount.
	HostPath string `json:"host_path,omitempty"`
	// The names' exact bytes (base64) when they are not UTF-8, and whether
	// the name is cut, as in the record (record.File).
	PathB64     string `json:"path_b64,omitempty"`
	HostPathB64 string `json:"host_path_b64,omitempty"`
	NameCut     bool   `json:"name_cut,omitempty"`
	// Stacks are the Python stacks that filled the file (Summary.Stacks),
	// most time first: ns is each one's part of the file's time in the
	// breakdown, thread_ns its thread time, bytes what it read.
	Stacks []attribution.StackShare `json:"stacks,omitempty"`
	// NoStackNS is the part of the file's time no stack carries.
	NoStackNS int64 `json:"no_stack_ns,omitempty"`
}

// Process is one process's time.
type Process struct {
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
	FillWaitNS int64    `json:"fill_wait_ns"`
	// Stack is 1 + the index in Summary.Stacks of the Python stack the
	// process was started from (a compiler: the line that ran it); 0
	// when none.
	Stack int `json:"stack,omitempty"`
}

// HitRatio is the share of accessed pages that came from the cache. A
// read that missed is usually also counted as accessed; where misses
// exceed accesses (readahead beyond what was read) the ratio is 0.
func HitRatio(f record.File) float64 {
	if f.PagesAccessed == 0 {
		if f.PagesMissed == 0 {
			return 1
		}
		return 0
	}
	// Pages another process was reading from disk while the run waited
	// for them are no hits a rerun could expect.
	fromDisk := f.PagesMissed + f.PagesShared
	if fromDisk >= f.PagesAccessed {
		return 0
	}
	return 1 - float64(fromDisk)/float64(f.PagesAccessed)
}

// FilesByCost orders files by what they cost the run: I/O wait plus the
// kernel time of filling the cache, then bytes from disk.
func FilesByCost(files []record.File) []record.File {
	// Positions are sorted, not the files: a stable sort's rotations of
	// whole records took a million files about 3 s. Ties keep the
	// record's order.
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		x, y := &files[i], &files[j]
		return cmp.Or(cmp.Compare(y.IOWaitNS+y.MissCPUNS, x.IOWaitNS+x.MissCPUNS),
			cmp.Compare(y.BytesFromDisk, x.BytesFromDisk), cmp.Compare(y.PagesAccessed, x.PagesAccessed), cmp.Compare(i, j))
	})
	out := make([]record.File, len(files))
	for k, i := range order {
		out[k] = files[i]
	}
	return out
}

// New builds the JSON summary of r; res is its attribution (computed
// when nil).
func New(r *record.Record, res *attribution.Result) *Summary {
	return NewBaseline(r, res, nil)
}

// NewBaseline is New with a baseline record for the devices' sequential
// rates (--baseline).
func NewBaseline(r *record.Record, res *attribution.Result, baseline *record.Record) *Summary {
	if res == nil {
		res = attribution.Analyze(r)
	}
	s := &Summary{Schema: Schema, Command: r.Command, ExitCode: r.ExitCode, Signal: r.Signal,
		StartError: r.StartError, Interrupted: r.Interrupted, Partial: r.Partial, WallNS: r.WallNS, StartupNS: r.StartupNS, LostEvents: r.Lost.Total(),
		Lost: r.Lost, FillEnd: r.FillEnd, User: r.User, Warnings: r.Warnings, Self: r.Self, MadeCold: r.MadeCold,
		Files: []File{}, Processes: []Process{}}
	s.Labels, s.Coarsened, s.Untraced = r.Labels, r.Coarsened, r.Untraced
	fileStacks := map[int]attribution.FileEvidence{}
	for _, row := range res.Breakdown {
		for _, fe := range row.Files {
			if len(fe.Stacks) > 0 {
				fileStacks[fe.ID] = fe
			}
		}
	}
	for _, f := range FilesByCost(r.Files) {
		s.Files = append(s.Files, File{Stacks: fileStacks[f.ID].Stacks, NoStackNS: fileStacks[f.ID].NoStackNS, Path: f.Path, SizeBytes: f.SizeBytes, PagesAccessed: f.PagesAccessed,
			PagesMissed: f.PagesMissed, PagesEvicted: f.PagesEvicted, PagesCreated: f.PagesCreated, HitRatio: HitRatio(f),
			BytesFromDisk: f.BytesFromDisk, IOWaitNS: f.IOWaitNS, MissCPUNS: f.MissCPUNS, HostPath: f.HostPath,
			FillWaitNS: f.FillWaitNS, PagesReread: f.PagesReread, PagesShared: f.PagesShared, Evictors: f.Evictors, Inserters: f.Inserters,
			DirectBytes: f.DirectBytes, DirectWaitNS: f.DirectWaitNS,
			PathB64: record.NameBase64(f.Path), HostPathB64: record.NameBase64(f.HostPath), NameCut: f.NameCut})
	}
	for _, p := range r.Processes {
		s.Processes = append(s.Processes, Process{PID: p.PID, PPID: p.PPID, Comm: p.Comm, Args: p.Args,
			ExitCode: p.ExitCode, StartNS: p.StartNS, EndNS: p.EndNS, CPUNS: p.CPUNS, OffCPUNS: p.OffCPUNS,
			IOWaitNS: p.IOWaitNS, MissCPUNS: p.MissCPUNS, RunQueueNS: p.RunQueueNS, FillWaitNS: p.FillWaitNS, Stack: p.Stack})
	}
	s.Stacks = r.Stacks
	for _, row := range res.Breakdown {
		s.Breakdown = append(s.Breakdown, Row{Category: string(row.Category), NS: row.NS, Pct: row.Pct, Share: row.Share})
	}
	s.Verdict = words.Verdict(res.Verdict)
	s.Label = res.Verdict.Label
	s.Phases, s.Cold, s.WarmEstimateNS = res.Phases, res.Cold, res.WarmEstimateNS
	s.RecurringNS = res.RecurringNS
	s.NotKeptNS = res.NotKeptNS
	s.Attribution = &Attribution{Result: res, Verdict: s.Verdict, Notes: words.Notes(res.Notes), VerdictData: res.Verdict}
	s.Caches, s.Compilers = []record.Cache{}, []record.Compiler{}
	if r.JIT != nil {
		s.Caches = append(s.Caches, r.JIT.Caches...)
		// Entry names (up to 2,000 per kind and cache) are for diff,
		// which reads records; the summary stays small.
		for i := range s.Caches {
			c := &s.Caches[i]
			c.MissedKeys, c.WrittenKeys, c.StaleKeys, c.HitKeys = nil, nil, nil, nil
		}
		s.Compilers = append(s.Compilers, r.JIT.Compilers...)
	}
	s.Downloads = []Download{}
	for _, d := range r.Downloads {
		fate, _ := attribution.FateOf(r, d)
		s.Downloads = append(s.Downloads, Download{Path: d.Path, Name: d.Name, Cache: d.Cache, Bytes: d.Bytes,
			StartNS: d.StartNS, EndNS: d.EndNS, MBPerS: d.MBPerSecond(), Peer: d.Peer, Host: d.Host, HostFrom: d.HostFrom, PID: d.PID,
			OnCPUNS: d.OnCPUNS, WaitNS: d.WaitNS, Fate: fate, Files: append([]record.DownloadFile{}, d.Files...),
			Destination: d.Destination, Expansion: d.Expansion, Connections: d.Connections, Candidates: d.Candidates, Unlisted: d.Unlisted, KeptIn: d.KeptIn})
	}
	s.Machine = r.Machine
	s.GPUs = []record.GPUSummary{}
	s.GPUInterference = []record.GPUInterference{}
	if r.GPU != nil {
		s.GPUUnavailable = r.GPU.Unavailable
		s.GPUs = append(s.GPUs, r.GPU.Summaries()...)
		s.GPUInterference = append(s.GPUInterference, r.GPU.Interference...)
	}
	s.Attached, s.Marks = r.Attached, r.Marks
	if len(r.Marks) > 0 {
		s.Segments = segments.ToJSON(attribution.Options{}.AnalyzeSegments(r, attribution.Segments(r, attribution.SegmentOptions{})))
	}
	a := advice.Of(r, baseline)
	words.Fill(&a)
	s.CacheMisses = append([]advice.CacheMiss{}, a.Misses...)
	s.Persist = append([]advice.Persist{}, a.Persist...)
	s.Reads = append([]advice.FileRead{}, a.Reads...)
	s.NoCache = append([]advice.NoCacheCompile{}, a.NoCache...)
	s.Advice = append([]advice.Action{}, a.Next...)
	s.CompilesAfterReady = a.Late
	s.RecurringReads = a.Recurring
	s.SlowFSReads = a.SlowFS
	s.DownloadStalls = a.Stalls
	s.SilentConnections, s.SlowDNS = a.Silent, a.SlowDNS
	s.BrokenCaches = a.Broken
	s.CacheCandidates = a.Candidates
	return s
}

// Write writes the summary of r as indented JSON.
func Write(w io.Writer, r *record.Record, res *attribution.Result) error {
	return WriteBaseline(w, r, res, nil)
}

// WriteBaseline is Write with a baseline record (NewBaseline).
func WriteBaseline(w io.Writer, r *record.Record, res *attribution.Result, baseline *record.Record) error {
	// Streamed: a long run's summary is megabytes of text, which
	// encoding/json would hold twice over while it indents.
	if err := jsonindent.Encode(w, NewBaseline(r, res, baseline)); err != nil {
		return fmt.Errorf("write JSON summary: %w", err)
	}
	return nil
}
