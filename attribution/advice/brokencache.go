package advice

import (
	"cmp"
	"slices"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// BrokenCache is a cache that failed to keep what this run compiled: a
// cache on NFS, or shared between processes, fails renames or unlinks
// (EBUSY, ENOENT, ESTALE) and its framework compiles again on the next
// run without a word.
type BrokenCache struct {
	Cache     string `json:"cache"`
	Framework string `json:"framework,omitempty"`
	Root      string `json:"root"`
	// Failures are the failed calls seen (record.Cache.Failures).
	Failures []record.CacheFailure `json:"failures,omitempty"`
	// Inferred is set when no failed call was seen (the path syscalls
	// were not traced for it) and the finding rests on EntriesGone of
	// EntriesWritten entries written this run being gone at the end.
	Inferred       bool   `json:"inferred,omitempty"`
	EntriesWritten uint64 `json:"entries_written,omitempty"`
	EntriesGone    uint64 `json:"entries_gone,omitempty"`
	// CompileNS is the compile time a rerun pays again: the JIT windows
	// of the processes whose calls failed and of the processes they
	// started (inferred: the cache's compile time, prorated by the
	// entries gone).
	CompileNS int64 `json:"compile_ns"`
	// Sentence is filled in by report/words.
	Sentence string  `json:"sentence"`
	Action   *Action `json:"-"`
}

// BrokenCaches finds r's caches that did not keep their entries,
// costliest first.
func BrokenCaches(r *record.Record) []BrokenCache {
	if r.JIT == nil {
		return nil
	}
	compile := notKeptCompileNS(r)
	var out []BrokenCache
	for _, c := range r.JIT.Caches {
		b := BrokenCache{Cache: c.Name, Framework: c.Framework, Root: c.Root, Failures: c.Failures,
			EntriesWritten: c.EntriesWritten, EntriesGone: c.EntriesGone}
		switch {
		case len(c.Failures) > 0:
			b.CompileNS = compile
		case attribution.GoneInferred(c):
			b.Inferred = true
			b.CompileNS = int64(float64(c.CompileNS) * float64(c.EntriesGone) / float64(max(c.EntriesWritten, 1)))
		default:
			continue
		}
		b.Action = &Action{SavesNS: b.CompileNS, Finding: b}
		out = append(out, b)
	}
	slices.SortStableFunc(out, func(x, y BrokenCache) int { return cmp.Compare(y.CompileNS, x.CompileNS) })
	return out
}

// notKeptCompileNS is the union of the JIT windows of the processes
// whose cache entries were not kept.
func notKeptCompileNS(r *record.Record) int64 {
	pids := attribution.NotKeptPIDs(r)
	if len(pids) == 0 {
		return 0
	}
	type span struct{ s, e int64 }
	var ws []span
	for _, w := range r.JIT.Windows {
		if pids[w.PID] && w.EndNS > w.StartNS {
			ws = append(ws, span{w.StartNS, w.EndNS})
		}
	}
	slices.SortFunc(ws, func(a, b span) int { return cmp.Compare(a.s, b.s) })
	var total, end int64
	for _, w := range ws {
		if w.s > end {
			total += w.e - w.s
		} else if w.e > end {
			total += w.e - end
		}
		end = max(end, w.e)
	}
	return total
}
