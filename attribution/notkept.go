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

// notKeptNS is the jit_compile time of the NotKeptPIDs, at most the
// row's.
func (a *analyzer) notKeptNS(jit *Row) int64 {
	pids := NotKeptPIDs(a.r)
	if jit == nil || len(pids) == 0 {
		return 0
	}
	var ns float64
	for i, pid := range a.jitProcs.keys {
		if pids[pid] {
			ns += a.jitProcs.vals[i]
		}
	}
	return min(int64(ns), jit.NS)
}
