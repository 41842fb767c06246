package advice

import (
	"cmp"
	"slices"

	"github.com/coldtrace/coldtrace/record"
)

// SlowFSRead is a file on a network or FUSE filesystem filled by many
// small requests: each pays the filesystem's per-request latency, which
// an eager sequential read pays once per large request.
type SlowFSRead struct {
	Path string `json:"path"`
	FS   string `json:"fs"`
	// Fills are the separate fills (misses that did not continue the
	// previous one), FillBytes their mean size, FillNS the time per fill.
	Fills     uint64  `json:"fills"`
	FillBytes uint64  `json:"fill_bytes"`
	FillNS    int64   `json:"fill_ns"`
	Faults    bool    `json:"faults"`
	MBps      float64 `json:"mb_per_s"`
	// SequentialMBps is the best rate at which this run read a file of
	// the same filesystem sequentially (0: none); Speedup is it over
	// MBps, quoted only then.
	SequentialMBps float64 `json:"sequential_mb_per_s,omitempty"`
	SequentialPath string  `json:"sequential_path,omitempty"`
	Speedup        float64 `json:"speedup,omitempty"`
	CostNS         int64   `json:"cost_ns"`
	// Sentence is filled in by report/words.
	Sentence string  `json:"sentence"`
	Action   *Action `json:"-"`
}

// minSlowSeqBytes is the least a sequentially read file must bring from
// the filesystem for its rate to stand for the filesystem's.
const minSlowSeqBytes = 1 << 20

// SlowFS finds the files of r on network or FUSE filesystems read in a
// pattern that is not sequential, with minFillNS or more of fill time,
// costliest first, ten at most.
func SlowFS(r *record.Record) []SlowFSRead {
	type seq struct {
		mbps float64
		path string
	}
	best := map[uint32]seq{}
	for _, f := range r.Files {
		if f.Order.Order() == "sequential" && f.BytesFromDisk >= minSlowSeqBytes && fsRate(f) > best[f.Dev].mbps {
			best[f.Dev] = seq{fsRate(f), f.Path}
		}
	}
	var out []SlowFSRead
	for _, f := range r.Files {
		fs := fsOf(f)
		o := f.Order
		if !networkFS(fs) || o == nil || o.Order() == "" || o.Order() == "sequential" || fillAllNS(f) < minReadNS {
			continue
		}
		fills := max(o.Misses-min(o.Jumps[0], o.Misses), 1)
		s := SlowFSRead{Path: f.Path, FS: fs, Fills: fills, FillBytes: f.BytesFromDisk / fills, FillNS: fillAllNS(f) / int64(fills),
			Faults: o.FaultPages >= o.ReadPages, MBps: fsRate(f), CostNS: fillAllNS(f)}
		if b := best[f.Dev]; b.mbps > s.MBps && s.MBps > 0 {
			s.SequentialMBps, s.SequentialPath, s.Speedup = b.mbps, b.path, b.mbps/s.MBps
			s.Action = &Action{SavesNS: s.CostNS - int64(float64(f.BytesFromDisk)/1e6/b.mbps*1e9), Finding: s}
		}
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b SlowFSRead) int { return cmp.Compare(b.CostNS, a.CostNS) })
	if len(out) > maxReads {
		out = out[:maxReads]
	}
	return out
}

// fsOf is the filesystem type of f: the record's, else its read order's.
func fsOf(f record.File) string {
	if f.FS == "" && f.Order != nil {
		return f.Order.FS
	}
	return f.FS
}

// fillAllNS is f's whole fill time: I/O wait, fill CPU and the other
// waits of its fills. A FUSE fault waits for the daemon's answer off
// the CPU but not in I/O wait, so fillNS alone misses it.
func fillAllNS(f record.File) int64 { return f.IOWaitNS + f.MissCPUNS + max(f.FillWaitNS, 0) }

// fsRate is f's bytes over its whole fill time, in MB/s.
func fsRate(f record.File) float64 {
	ns := fillAllNS(f)
	if ns <= 0 {
		return 0
	}
	return float64(f.BytesFromDisk) / 1e6 / (float64(ns) / 1e9)
}
