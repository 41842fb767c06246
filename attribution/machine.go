package attribution

import (
	"math"

	"github.com/coldtrace/coldtrace/record"
)

// The kinds of MemoryCause: who evicted the pages that were read again.
const (
	// MemoryLimit: the run's own memory cgroup limit (its threads
	// reclaimed in their cgroup).
	MemoryLimit = "memory_limit"
	// MemoryPressure: the machine's memory (kswapd, global direct reclaim).
	MemoryPressure = "memory_pressure"
	// MemoryEvictedBy: a process's fadvise, truncate, unlink, ... or DAMON.
	MemoryEvictedBy = "evicted_by"
)

// MemoryCause says that a file was read from disk more than once because
// its pages were evicted during the run, and by whom.
type MemoryCause struct {
	Kind      string `json:"kind"`
	File      string `json:"file"`
	SizeBytes int64  `json:"size_bytes"`
	// FromDiskBytes is what the run read of it from disk; Factor that
	// over its size (3.0: read three times).
	FromDiskBytes uint64  `json:"from_disk_bytes"`
	Factor        float64 `json:"factor"`
	RereadBytes   uint64  `json:"reread_bytes"`
	// RereadNS is the run's re-read time (all files), kept in the warm
	// estimate.
	RereadNS int64 `json:"reread_ns"`
	// EvictedBytes of the file were evicted during the run, most by
	// Evictor.
	EvictedBytes uint64          `json:"evicted_bytes"`
	Evictor      *record.Evictor `json:"evictor,omitempty"`
	// LimitBytes and Cgroup: the lowest memory limit of the run's cgroups
	// (MemoryLimit).
	LimitBytes uint64 `json:"limit_bytes,omitempty"`
	Cgroup     string `json:"cgroup,omitempty"`
	// AvailableBytes is the lower MemAvailable of the start and the end.
	AvailableBytes uint64 `json:"available_bytes,omitempty"`
	// DataBytes is the data the run read from disk once (every file's
	// distinct pages): the memory it needs to read each page once.
	DataBytes uint64 `json:"data_bytes"`
}

// Contention says the run waited for CPUs other work held.
type Contention struct {
	// RunQueueNS is the traced threads' run-queue wait (thread time);
	// FillRunQueueNS its part inside page-cache fills (in disk_read).
	RunQueueNS     int64 `json:"runqueue_ns"`
	FillRunQueueNS int64 `json:"fill_runqueue_ns"`
	// OthersCPUNS is the CPU time of processes outside the run during
	// it, OthersCount how many, Others the heaviest names.
	OthersCPUNS int64             `json:"others_cpu_ns"`
	OthersCount int               `json:"others_count"`
	Others      []record.OtherCPU `json:"others,omitempty"`
	StealNS     int64             `json:"steal_ns,omitempty"`
}

// rereadNS is the disk_read time of re-read pages: each file's part of
// the row in the proportion of its pages that were read again.
func rereadNS(r *record.Record, disk *Row) int64 {
	if disk == nil {
		return 0
	}
	var kept float64
	for _, fe := range disk.Files {
		if fe.ID < 0 || fe.PagesMissed == 0 || fe.PagesReread == 0 {
			continue
		}
		kept += float64(fe.NS) * min(1, float64(fe.PagesReread)/float64(fe.PagesMissed))
	}
	return int64(math.Round(kept))
}

// recurringDiskNS sums the disk_read row's recurring time (FileEvidence
// RecurringNS): direct I/O and I/O outside the page cache.
func recurringDiskNS(disk *Row) int64 {
	if disk == nil {
		return 0
	}
	var n int64
	for _, fe := range disk.Files {
		n += fe.RecurringNS
	}
	return min(n, disk.NS)
}

// A file is named as read again when at least this much of it, and this
// share of what it read from disk, was re-read.
const (
	rereadMinBytes = 1 << 20
	rereadMinShare = 0.10
)

// memoryCause finds the file read again the most and who evicted it.
func memoryCause(r *record.Record, res *Result) *MemoryCause {
	ps := uint64(max(r.Host.PageSize, 1))
	if r.Host.PageSize <= 0 {
		ps = 4096
	}
	var top *record.File
	var data uint64
	for i := range r.Files {
		f := &r.Files[i]
		data += (f.PagesMissed - min(f.PagesReread, f.PagesMissed)) * ps
		if f.PagesReread*ps < rereadMinBytes || float64(f.PagesReread) < rereadMinShare*float64(f.PagesMissed) {
			continue
		}
		if top == nil || f.PagesReread > top.PagesReread {
			top = f
		}
	}
	if top == nil {
		return nil
	}
	mc := &MemoryCause{File: top.Name(), SizeBytes: top.SizeBytes, FromDiskBytes: top.PagesMissed * ps,
		RereadBytes: top.PagesReread * ps, RereadNS: res.RereadNS, EvictedBytes: top.PagesEvicted * ps, DataBytes: data}
	once := top.PagesMissed - top.PagesReread
	switch {
	case top.SizeBytes > 0:
		mc.Factor = float64(top.PagesMissed*ps) / float64(top.SizeBytes)
	case once > 0:
		mc.Factor = float64(top.PagesMissed) / float64(once)
	}
	if len(top.Evictors) > 0 {
		e := top.Evictors[0]
		mc.Evictor = &e
	}
	limit, cg := r.Machine.MemoryLimit()
	if r.Machine != nil {
		mc.AvailableBytes = min(r.Machine.MemStart.AvailableBytes, r.Machine.MemEnd.AvailableBytes)
	}
	switch {
	case mc.Evictor != nil && mc.Evictor.Kind == record.EvictMemcgReclaim,
		mc.Evictor == nil && limit > 0 && limit < data:
		mc.Kind = MemoryLimit
		mc.LimitBytes = limit
		if cg != nil {
			mc.Cgroup = cg.Path
		}
	case mc.Evictor == nil, mc.Evictor.Kind == record.EvictKswapd, mc.Evictor.Kind == record.EvictDirectReclaim:
		mc.Kind = MemoryPressure
	default:
		mc.Kind = MemoryEvictedBy
	}
	return mc
}

// Contention is named when the run's threads waited for a CPU for at
// least this share of the wall time while other work ran.
const (
	contentionMinShare = 0.05
	othersMinShare     = 0.10
)

func contention(r *record.Record, res *Result) *Contention {
	if r.Machine == nil || res.WallNS <= 0 {
		return nil
	}
	c := &Contention{OthersCPUNS: r.Machine.OthersCPUNS, OthersCount: r.Machine.OthersCount,
		Others: r.Machine.Others, StealNS: r.Machine.StealNS}
	for _, p := range r.Processes {
		c.RunQueueNS += p.RunQueueNS
		c.FillRunQueueNS += p.FillRunQueueNS
	}
	wall := float64(res.WallNS)
	if float64(c.RunQueueNS) < contentionMinShare*wall {
		return nil
	}
	if float64(c.OthersCPUNS) < othersMinShare*wall && float64(c.StealNS) < contentionMinShare*wall {
		return nil
	}
	return c
}

// machineNotes says which files came from disk through another reader,
// and which were evicted by a process outside the run or by DAMON
// (unless the verdict names that already).
func machineNotes(r *record.Record, res *Result) []Note {
	ps := uint64(max(r.Host.PageSize, 1))
	if r.Host.PageSize <= 0 {
		ps = 4096
	}
	var out []Note
	for i := range r.Files {
		f := &r.Files[i]
		if f.PagesShared > 0 && len(f.Inserters) > 0 {
			in := f.Inserters[0]
			out = append(out, Note{Kind: NoteSharedRead, Path: f.Name(), Bytes: min(f.PagesShared, in.Pages) * ps, Inserter: &in})
		}
		for _, e := range f.Evictors {
			if e.Traced || e.Pages*ps < rereadMinBytes || (e.Kind != record.EvictSyscall && e.Kind != record.EvictKdamond) {
				continue
			}
			if m := res.Verdict.Memory; m != nil && m.Kind == MemoryEvictedBy && m.File == f.Name() {
				continue
			}
			e := e
			out = append(out, Note{Kind: NoteEvictedBy, Path: f.Name(), Bytes: e.Pages * ps, Evictor: &e})
		}
	}
	return out
}
