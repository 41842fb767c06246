package advice

import (
	"cmp"
	"slices"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// RecurringRead is a file read from its filesystem on every run: the
// page cache does not keep it across opens (FUSE without kernel_cache),
// so a warm rerun reads it again.
type RecurringRead struct {
	Path   string `json:"path"`
	FS     string `json:"fs"`
	Bytes  uint64 `json:"bytes"`
	FillNS int64  `json:"fill_ns"`
	// Misses are page misses (the record keeps no request sizes).
	Misses uint64 `json:"misses,omitempty"`
	// Sentence is filled in by report/words.
	Sentence string `json:"sentence"`
}

// Recurring lists the files of r read from a filesystem that drops their
// cached pages at open, costliest first, ten at most.
func Recurring(r *record.Record) []RecurringRead {
	var out []RecurringRead
	for _, f := range r.Files {
		if f.BytesFromDisk == 0 || !attribution.Recurring(f) {
			continue
		}
		fs := fsOf(f)
		rr := RecurringRead{Path: f.Path, FS: fs, Bytes: f.BytesFromDisk, FillNS: fillAllNS(f)}
		if o := f.Order; o != nil && o.Misses > 0 {
			rr.Misses = o.Misses
		}
		out = append(out, rr)
	}
	slices.SortStableFunc(out, func(a, b RecurringRead) int { return cmp.Compare(b.FillNS, a.FillNS) })
	if len(out) > maxReads {
		out = out[:maxReads]
	}
	return out
}
