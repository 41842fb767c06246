package jit

import (
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/registry"
)

// rootSet finds the cache a path belongs to: the longest matching root;
// among roots of equal length, the one whose entry or temp patterns fit
// the file.
type rootSet struct {
	fixed    []*rootState // by Path length, longest first
	anywhere []*rootState
	byKey    map[string]*rootState
}

func newRootSet() *rootSet { return &rootSet{byKey: map[string]*rootState{}} }

// add registers r and returns its state; a root already known (same
// cache, same path) is returned as is.
func (rs *rootSet) add(r registry.Root) (*rootState, bool) {
	key := r.Spec.Name + "\x00" + r.Path
	if st, ok := rs.byKey[key]; ok {
		return st, false
	}
	st := newRootState(r)
	rs.byKey[key] = st
	if r.Anywhere != "" {
		rs.anywhere = append(rs.anywhere, st)
	} else {
		rs.fixed = append(rs.fixed, st)
		sort.SliceStable(rs.fixed, func(i, j int) bool { return len(rs.fixed[i].root.Path) > len(rs.fixed[j].root.Path) })
	}
	return st, true
}

// match returns the cache p belongs to and p relative to its root; p
// must be absolute and clean. Of the roots p is under, the longest wins,
// unless p is nothing to it (not an entry, temp file or bookkeeping
// file): then the next longest that knows p does (a .pyc under
// PYTHONPYCACHEPREFIX is Python's even below a Numba __pycache__).
func (rs *rootSet) match(p string) (*rootState, string) {
	type cand struct {
		st  *rootState
		n   int
		rel string
	}
	var buf [8]cand
	cands := buf[:0]
	for _, st := range rs.fixed {
		if rel, ok := under(p, st.root.Path); ok && rel != "" {
			cands = append(cands, cand{st, len(st.root.Path), rel})
		}
	}
	for _, st := range rs.anywhere {
		d := "/" + st.root.Anywhere + "/"
		i := strings.LastIndex(p, d)
		if i < 0 || i+len(d) >= len(p) {
			continue
		}
		cands = append(cands, cand{st, i + len(d) - 1, p[i+len(d):]})
	}
	switch len(cands) {
	case 0:
		return nil, ""
	case 1:
		return cands[0].st, cands[0].rel
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].n > cands[j].n })
	for _, c := range cands {
		if classify(c.st.root.Spec, c.rel).kind != kindNone {
			return c.st, c.rel
		}
	}
	return cands[0].st, cands[0].rel
}

// any reports whether p is below some root; it allocates nothing.
func (rs *rootSet) any(p string) bool {
	for _, st := range rs.fixed {
		if _, ok := under(p, st.root.Path); ok {
			return true
		}
	}
	for _, st := range rs.anywhere {
		d := st.root.Anywhere
		for i := strings.Index(p, d); i >= 0; {
			j := i + len(d)
			if i > 0 && p[i-1] == '/' && j < len(p) && p[j] == '/' {
				return true
			}
			k := strings.Index(p[j:], d)
			if k < 0 {
				break
			}
			i = j + k
		}
	}
	return false
}

// under reports whether p is strictly below dir, with the rest.
func under(p, dir string) (string, bool) {
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), p != "/"
	}
	if len(p) > len(dir) && strings.HasPrefix(p, dir) && p[len(dir)] == '/' {
		return p[len(dir)+1:], true
	}
	return "", false
}
