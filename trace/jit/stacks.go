package jit

import (
	"cmp"
	"os"
	"slices"

	"github.com/cilium/ebpf"

	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
	"github.com/coldtrace/coldtrace/record"
)

// withStacks has spec take the stack walker's maps (stacks, by name) and
// turns its stacks on; without a walker (--no-stacks) its copies of the
// walker's maps are made as small as they can be and stay empty, so no
// walk runs.
func withStacks(spec *ebpf.CollectionSpec, opts *ebpf.CollectionOptions, stacks map[string]*ebpf.Map) error {
	if stacks == nil {
		for _, name := range []string{bpfjit.JitMapPyConfs, bpfjit.JitMapPyStacks, bpfjit.JitMapPyNatives} {
			if m := spec.Maps[name]; m != nil {
				m.MaxEntries = 1
			}
		}
		if m := spec.Maps[bpfjit.JitMapPyEvents]; m != nil {
			m.MaxEntries = uint32(os.Getpagesize())
		}
		return nil
	}
	for k, v := range stacks {
		opts.MapReplacements[k] = v
	}
	return spec.Variables[bpfjit.JitVarPyStacksOn].Set(uint32(1))
}

// stackCharges are a cache's parts by the Python stack of the lookups
// that made them: its misses' compile time (comp, nil for a cache that
// compiles nothing), its misses and its hits, most time first. Stacks
// that intern cannot name (never decoded) are left out; several ids that
// decode to one stack are summed.
func (r *rootState) stackCharges(comp *rootCompile, intern func(uint64) int, pidOf func(uint64) int32) []record.StackCharge {
	if intern == nil {
		return nil
	}
	by := map[int]*record.StackCharge{}
	get := func(id uint64) *record.StackCharge {
		idx := intern(id)
		if idx == 0 {
			return nil
		}
		sc := by[idx]
		if sc == nil {
			sc = &record.StackCharge{Stack: idx}
			if pidOf != nil {
				sc.PID = pidOf(id)
			}
			by[idx] = sc
		}
		return sc
	}
	if comp != nil {
		for id, ns := range comp.byStack {
			if sc := get(id); sc != nil {
				sc.NS += ns
			}
		}
	}
	for id, n := range r.stackMisses {
		if sc := get(id); sc != nil {
			sc.Misses += n
		}
	}
	for id, n := range r.stackHits {
		if sc := get(id); sc != nil && n > 0 {
			sc.Hits += n
		}
	}
	out := make([]record.StackCharge, 0, len(by))
	for _, sc := range by {
		out = append(out, *sc)
	}
	slices.SortFunc(out, func(a, b record.StackCharge) int {
		return cmp.Or(cmp.Compare(b.NS, a.NS), cmp.Compare(b.Misses, a.Misses), cmp.Compare(b.Hits, a.Hits), cmp.Compare(a.Stack, b.Stack))
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
