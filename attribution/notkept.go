package attribution

import "github.com/coldtrace/coldtrace/record"

// NotKeptPIDs are the processes whose cache entries were not kept: a
// rename, unlink or open under a cache root failed in them
// (record.Cache.Failures), with every process they started (the
// compilers that compiled what was lost). A rerun compiles again what
// they compiled.
func NotKeptPIDs(r *record.Record) map[int32]bool {
	if r.JIT == nil {
		return nil
	}
	out := map[int32]bool{}
	for _, c := range r.JIT.Caches {
		for _, f := range c.Failures {
			for _, pid := range f.PIDs {
				out[pid] = true
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	// Descendants: a parent is listed before its children in the order
	// processes started, but a pid may be reused; iterate to a fixed
	// point, bounded by the tree's depth.
	for changed := true; changed; {
		changed = false
		for _, p := range r.Processes {
			if out[p.PPID] && !out[p.PID] {
				out[p.PID] = true
				changed = true
			}
		}
	}
	return out
}

// GoneInferred says whether cache c is taken not to have kept its
// entries though no failed call was seen (the path syscalls were not
// traced for it): most of the entries it wrote this run were gone at
// the end.
func GoneInferred(c record.Cache) bool {
	return len(c.Failures) == 0 && c.EntriesGone > 0 && 2*c.EntriesGone >= c.EntriesWritten
}

// notKeptNS is the jit_compile time a rerun pays again because its
// entries were not kept, at most the row's: that of the NotKeptPIDs, and
// of the in-process compiles of each cache GoneInferred, prorated by the
// entries gone.
func (a *analyzer) notKeptNS(jit *Row) int64 {
	if jit == nil || a.r.JIT == nil {
		return 0
	}
	pids := NotKeptPIDs(a.r)
	var ns float64
	for i, pid := range a.jitProcs.keys {
		if pids[pid] {
			ns += a.jitProcs.vals[i]
		}
	}
	for _, c := range a.r.JIT.Caches {
		if GoneInferred(c) {
			ns += a.jitSrc.get(srcKey{"in_process", c.Name}) * float64(c.EntriesGone) / float64(max(c.EntriesWritten, 1))
		}
	}
	return min(int64(ns), jit.NS)
}
