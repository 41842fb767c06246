package attribution

import (
	"math"
	"slices"
	"strconv"

	"github.com/coldtrace/coldtrace/record"
)

// VerdictKind says what kind of run the verdict found.
type VerdictKind string

// The verdict kinds.
const (
	// VerdictEmpty: the command exited at once; there is no time to attribute.
	VerdictEmpty VerdictKind = "empty"
	// VerdictCold: the run did what a rerun would not repeat (ColdBy):
	// read from disk what a rerun finds cached, downloaded into files
	// that stay, or compiled cache entries.
	VerdictCold VerdictKind = "cold"
	// VerdictWarm: it did none of that; a rerun would save little.
	VerdictWarm VerdictKind = "warm"
)

// Verdict is the result in one or two sentences, as data: report/words
// says it in words. For a cold run, Causes are the avoidable rows that
// cost time, heaviest first. For a warm run, Causes are the largest row
// (the disk time a rerun pays again counts as one) and the second when
// it has at least 10%; Mostly is the main avoidable row when it cost
// anything.
type Verdict struct {
	Kind VerdictKind `json:"kind"`
	// Label is Kind with what made the run cold and the time it took,
	// as text, JSON and diff print it: "cold (read 144.0 MiB from disk
	// in 30ms)", "warm".
	Label string `json:"label"`
	// ColdBy is the evidence of the cold rule that decided Kind.
	ColdBy *ColdBy `json:"cold_by,omitempty"`
	Causes []Cause `json:"causes,omitempty"`
	// AvoidableNS is the time of disk_read, jit_compile and download
	// together; AvoidableShare is its share of the wall time.
	AvoidableNS    int64   `json:"avoidable_ns"`
	AvoidableShare float64 `json:"avoidable_share"`
	Mostly         *Cause  `json:"mostly,omitempty"`
	WarmEstimateNS int64   `json:"warm_estimate_ns"`
	// RecurringNS is the disk_read time a rerun pays again (Result's):
	// direct I/O and I/O outside the page cache. It is not in
	// AvoidableNS, and no file it was spent on is named as "not in page
	// cache".
	RecurringNS int64 `json:"recurring_ns,omitempty"`
	// Memory is set when files were read from disk again because their
	// pages were evicted during the run: the machine, not a cold cache,
	// is the cause, and a rerun will read them again.
	Memory *MemoryCause `json:"memory,omitempty"`
	// Contention is set when the run waited for CPUs that other
	// processes (or other guests of the VM) held.
	Contention *Contention `json:"contention,omitempty"`
}

// Cause is one row the verdict names, with the evidence it names.
type Cause struct {
	Category Category `json:"category"`
	NS       int64    `json:"ns"`
	Pct      int      `json:"pct"`
	// Names are the top evidence: the costliest file (disk_read), up to
	// two compilers (jit_compile), the first download (download).
	Names []string `json:"names,omitempty"`
	// OtherFiles counts further files with disk time (disk_read).
	OtherFiles int `json:"other_files,omitempty"`
	// Unidentified is set when disk time came from files no delta named
	// and no named file cost time.
	Unidentified bool `json:"unidentified,omitempty"`
	// NoneMissed is set when no named file had a page of its own read
	// from disk: their time was waits on pages already being read in (by
	// readahead, or by another process), so they are not called "not in
	// page cache".
	NoneMissed bool `json:"none_missed,omitempty"`
	// Recurring is set on a disk_read cause of a warm run that is the
	// time a rerun pays again whatever the cache holds (direct I/O, I/O
	// outside the page cache): NS is that part of the row, Names the
	// file that took most of it (or "[I/O outside the page cache]").
	Recurring bool `json:"recurring,omitempty"`
	// Download is the costliest download's evidence (download): what,
	// from where, how fast, into which cache, and whether a warm rerun
	// downloads it again.
	Download *DownloadEvidence `json:"download,omitempty"`
}

// verdict judges the result: a cold start when the cold rule holds (cb),
// however little of the wall time it cost.
func verdict(res *Result, cb ColdBy) (v Verdict) {
	v = Verdict{WarmEstimateNS: res.WarmEstimateNS, RecurringNS: res.RecurringNS}
	if res.WallNS <= 0 {
		v.Kind = VerdictEmpty
		v.Label = label(v)
		return v
	}
	v.ColdBy = &cb
	var cold, warm []*Row
	for i := range res.Breakdown {
		row := &res.Breakdown[i]
		if row.Category.Avoidable() {
			v.AvoidableNS += row.NS
			if row.Category == DiskRead {
				v.AvoidableNS -= min(res.RecurringNS, row.NS)
			}
			if row.Category == JITCompile {
				v.AvoidableNS -= min(res.NotKeptNS, row.NS)
			}
			cold = append(cold, row)
		} else {
			warm = append(warm, row)
		}
	}
	v.AvoidableShare = share(v.AvoidableNS, res.WallNS)
	byNS := func(x, y *Row) int { return int(sign(y.NS - x.NS)) }
	// Cold rows by the time a warm rerun would save of them.
	saved := func(row *Row) int64 {
		if row.Category == DiskRead {
			return row.NS - min(res.RecurringNS, row.NS)
		}
		return row.NS
	}
	slices.SortStableFunc(cold, func(x, y *Row) int { return int(sign(saved(y) - saved(x))) })
	slices.SortStableFunc(warm, byNS)

	defer func() { v.Label = label(v) }()
	if cb.Cold() {
		v.Kind = VerdictCold
		for i, row := range cold {
			if saved(row) == 0 || (i > 0 && row.Pct == 0) {
				continue
			}
			v.Causes = append(v.Causes, cause(row))
		}
		return v
	}
	v.Kind = VerdictWarm
	// Disk time a rerun pays again is part of what a warm run is: a run
	// that waits most of its time on direct reads is said to, not "CPU".
	var candidates []Cause
	for _, row := range warm {
		candidates = append(candidates, cause(row))
	}
	if row := res.Row(DiskRead); row != nil && res.RecurringNS > 0 {
		candidates = append(candidates, recurringCause(row, min(res.RecurringNS, row.NS), res.WallNS))
		slices.SortStableFunc(candidates, func(x, y Cause) int { return int(sign(y.NS - x.NS)) })
	}
	v.Causes = candidates[:1]
	if len(candidates) > 1 && candidates[1].Pct >= 10 {
		v.Causes = append(v.Causes, candidates[1])
	}
	if v.AvoidableNS > 0 && saved(cold[0]) > 0 {
		c := cause(cold[0])
		v.Mostly = &c
	}
	return v
}

func sign(v int64) int64 {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// recurringCause is the part ns of the disk_read row that a rerun pays
// again, named by the file that took most of it (OutsidePageCache when
// that was I/O no file explains).
func recurringCause(row *Row, ns, wallNS int64) Cause {
	c := Cause{Category: DiskRead, NS: ns, Pct: int(math.Round(100 * float64(ns) / float64(wallNS))), Recurring: true}
	var top int64
	for _, f := range row.Files {
		if f.RecurringNS <= 0 {
			continue
		}
		if f.RecurringNS > top {
			if len(c.Names) > 0 {
				c.OtherFiles++
			}
			top, c.Names = f.RecurringNS, []string{f.Path}
		} else {
			c.OtherFiles++
		}
	}
	return c
}

// cause names the top evidence of a row.
func cause(row *Row) Cause {
	c := Cause{Category: row.Category, NS: row.NS, Pct: row.Pct}
	switch row.Category {
	case DiskRead:
		unknown := false
		for _, f := range row.Files {
			if f.NS == 0 || f.ID < 0 {
				unknown = unknown || f.NS > 0
				continue
			}
			// A file whose time a rerun pays again (direct I/O) is
			// no page-cache miss.
			if f.NS-f.RecurringNS <= 0 {
				continue
			}
			if len(c.Names) == 0 {
				c.Names = []string{f.Path}
				c.NoneMissed = true
			} else {
				c.OtherFiles++
			}
			c.NoneMissed = c.NoneMissed && f.PagesMissed == 0
		}
		c.Unidentified = len(c.Names) == 0 && unknown
	case JITCompile:
		for _, x := range row.Compilers {
			if x.NS > 0 && len(c.Names) < 2 {
				c.Names = append(c.Names, x.Name)
			}
		}
	case Download:
		for _, d := range row.Downloads {
			if d.NS > 0 {
				c.Names = []string{d.Name}
				d := d
				c.Download = &d
				break
			}
		}
	}
	return c
}

// NoteKind names a caveat for the reader of a result.
type NoteKind string

// The note kinds.
const (
	// NoteStartError: the command could not be started (Text says why).
	NoteStartError NoteKind = "start_error"
	// NoteInterrupted: coldtrace was stopped before the command ended.
	NoteInterrupted NoteKind = "interrupted"
	// NoteKilled: the command died of signal Text (ExitCode).
	NoteKilled NoteKind = "killed"
	// NoteLost: events were lost (Lost); the numbers are lower bounds.
	NoteLost NoteKind = "lost_events"
	// NoteUnobservedAll: no thread sample covers the run.
	NoteUnobservedAll NoteKind = "unobserved_all"
	// NoteUnobservedTail: the last NS after the final sample were not
	// observed.
	NoteUnobservedTail NoteKind = "unobserved_tail"
	// NoteAfterExit: processes ran NS of thread time after the exit.
	NoteAfterExit NoteKind = "after_exit"
	// NoteGPUUnavailable: no GPU data (Text says why).
	NoteGPUUnavailable NoteKind = "gpu_unavailable"
	// NoteGPUShared: GPU (index) was also used by untraced processes
	// (Names); RunSharePct is the run's share when known.
	NoteGPUShared NoteKind = "gpu_shared"
	// NoteGPULost: GPU (index) was lost NS into the run (Text: why); its
	// numbers stop there, the rest of the trace goes on.
	NoteGPULost NoteKind = "gpu_lost"
	// NoteGPUUnsupported: GPU (index) did not answer the queries Names.
	NoteGPUUnsupported NoteKind = "gpu_unsupported"
	// NoteSharedRead: Bytes of file Path came from disk through a process
	// outside the run (Inserter) while the run waited for them.
	NoteSharedRead NoteKind = "shared_read"
	// NoteEvictedBy: a process outside the run, or DAMON (Evictor),
	// evicted Bytes of file Path during the run.
	NoteEvictedBy NoteKind = "evicted_by"
)

// Note is one caveat, as data; report/words says it.
type Note struct {
	Kind        NoteKind         `json:"kind"`
	NS          int64            `json:"ns,omitempty"`
	Text        string           `json:"text,omitempty"`
	ExitCode    int              `json:"exit_code,omitempty"`
	Lost        *record.Lost     `json:"lost,omitempty"`
	GPU         int              `json:"gpu,omitempty"`
	Processes   int              `json:"processes,omitempty"`
	Names       []string         `json:"names,omitempty"`
	RunSharePct *float64         `json:"run_share_pct,omitempty"`
	Path        string           `json:"path,omitempty"`
	Bytes       uint64           `json:"bytes,omitempty"`
	Inserter    *record.Inserter `json:"inserter,omitempty"`
	Evictor     *record.Evictor  `json:"evictor,omitempty"`
}

func (a *analyzer) notes(res *Result) []Note {
	r := a.r
	var out []Note
	if r.StartError != "" {
		out = append(out, Note{Kind: NoteStartError, Text: r.StartError})
	}
	if r.Interrupted {
		out = append(out, Note{Kind: NoteInterrupted})
	}
	if r.Signal != "" {
		out = append(out, Note{Kind: NoteKilled, Text: r.Signal, ExitCode: r.ExitCode})
	}
	if l := r.Lost; l.Total() > 0 {
		out = append(out, Note{Kind: NoteLost, Lost: &l})
	}
	switch {
	case res.UnobservedNS > 0 && res.UnobservedNS == res.WallNS:
		out = append(out, Note{Kind: NoteUnobservedAll, NS: res.UnobservedNS})
	case res.UnobservedNS > 0:
		out = append(out, Note{Kind: NoteUnobservedTail, NS: res.UnobservedNS})
	}
	if res.AfterExitNS > 0 {
		out = append(out, Note{Kind: NoteAfterExit, NS: res.AfterExitNS})
	}
	if r.GPU != nil && r.GPU.Unavailable != "" {
		out = append(out, Note{Kind: NoteGPUUnavailable, Text: r.GPU.Unavailable})
	}
	out = append(out, machineNotes(r, res)...)
	out = append(out, gpuDeviceNotes(r)...)
	for _, s := range a.gpuSums {
		others := r.GPU.InterferenceOn(s.Index)
		if len(others) == 0 {
			continue
		}
		n := Note{Kind: NoteGPUShared, GPU: s.Index, Processes: len(others), RunSharePct: s.RunSharePct}
		for _, x := range others {
			name := x.Name
			if name == "" {
				name = "pid " + strconv.Itoa(int(x.PID))
			}
			if !slices.Contains(n.Names, name) {
				n.Names = append(n.Names, name)
			}
		}
		out = append(out, n)
	}
	return out
}

// gpuDeviceNotes says, once per GPU, that it was lost (and when) and
// which of its queries it did not support.
func gpuDeviceNotes(r *record.Record) []Note {
	if r.GPU == nil || r.GPU.Unavailable != "" {
		return nil
	}
	var out []Note
	for _, d := range r.GPU.Devices {
		if d.LostNS != nil {
			out = append(out, Note{Kind: NoteGPULost, GPU: d.Index, NS: *d.LostNS, Text: d.LostReason})
		}
		if len(d.Unsupported) > 0 {
			out = append(out, Note{Kind: NoteGPUUnsupported, GPU: d.Index, Names: slices.Clone(d.Unsupported)})
		}
	}
	return out
}
