package jit

import (
	"path"
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

type span struct{ start, end int64 }

// unionLen is the length of the union of spans.
func unionLen(spans []span) int64 {
	if len(spans) == 0 {
		return 0
	}
	s := append([]span(nil), spans...)
	sort.Slice(s, func(i, j int) bool { return s[i].start < s[j].start })
	var total int64
	cur := s[0]
	for _, x := range s[1:] {
		if x.start <= cur.end {
			cur.end = max(cur.end, x.end)
			continue
		}
		total += max(0, cur.end-cur.start)
		cur = x
	}
	return total + max(0, cur.end-cur.start)
}

// Matcher says which processes are compilers: by program name (shared
// with the attribution engine) or, for interpreter-run compile workers, by
// argument.
type Matcher struct {
	names registry.CompilerNames
	args  []registry.ArgCompiler
}

// NewMatcher matches registry.Compilers and extra by name and args by
// argument (DefaultArgCompilers when nil).
func NewMatcher(extra []string, args []registry.ArgCompiler) *Matcher {
	m := &Matcher{names: registry.NewCompilerNames(extra), args: args}
	if args == nil {
		m.args = registry.DefaultArgCompilers
	}
	return m
}

// MatchName reports whether name is a compiler program.
func (m *Matcher) MatchName(name string) bool { return m.names.Match(name) }

// compilerName is the name p's compile time is filed under (its comm,
// like the attribution engine), and whether it was matched by argument.
func (m *Matcher) compilerName(p *record.Process) (name string, byArgs, ok bool) {
	if m.MatchName(p.Comm) || (p.Exe != "" && m.MatchName(path.Base(p.Exe))) {
		// Asked only about itself (the attribution engine agrees).
		return procName(p), false, !registry.QueriesOnly(p.Args)
	}
	for _, a := range m.args {
		for _, arg := range p.Args {
			if strings.Contains(arg, a.Contains) {
				return a.Name, true, true
			}
		}
	}
	return "", false, false
}

func procName(p *record.Process) string {
	if p.Comm != "" {
		return p.Comm
	}
	if p.Exe != "" {
		return path.Base(p.Exe)
	}
	return "?"
}

// compilerRun is one topmost compiler process with its whole subtree.
type compilerRun struct {
	pid  int32
	name string
	span span
}

type procTree struct {
	byPID    map[int32]*record.Process
	children map[int32][]int32
	wall     int64
}

func newProcTree(procs []record.Process, wall int64) *procTree {
	t := &procTree{byPID: map[int32]*record.Process{}, children: map[int32][]int32{}, wall: wall}
	for i := range procs {
		p := &procs[i]
		if _, dup := t.byPID[p.PID]; dup {
			continue
		}
		t.byPID[p.PID] = p
	}
	for pid, p := range t.byPID {
		if p.PPID != pid {
			t.children[p.PPID] = append(t.children[p.PPID], pid)
		}
	}
	for _, c := range t.children {
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	}
	return t
}

func (t *procTree) end(p *record.Process) int64 {
	if !p.Exited || p.EndNS <= 0 {
		return max(t.wall, p.StartNS)
	}
	return p.EndNS
}

// subtreeEnd is when p and all its descendants had ended.
func (t *procTree) subtreeEnd(pid int32) int64 {
	var e int64
	seen := map[int32]bool{}
	stack := []int32{pid}
	for len(stack) > 0 {
		q := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[q] {
			continue
		}
		seen[q] = true
		if p := t.byPID[q]; p != nil {
			e = max(e, t.end(p))
		}
		stack = append(stack, t.children[q]...)
	}
	return e
}

// isAncestor reports whether anc is pid or one of its ancestors.
func (t *procTree) isAncestor(anc, pid int32) bool {
	seen := map[int32]bool{}
	for q := pid; q > 0 && !seen[q]; {
		if q == anc {
			return true
		}
		seen[q] = true
		p := t.byPID[q]
		if p == nil {
			return false
		}
		q = p.PPID
	}
	return false
}

// compilers finds the compiler processes: the per-name totals, a window
// per topmost compiler (and per process of an argument-matched worker
// subtree, which the attribution engine cannot recognise by name), and
// the topmost runs for assigning compile time to cache misses.
func compilerRuns(t *procTree, m *Matcher) ([]record.Compiler, []record.JITWindow, []compilerRun) {
	type info struct {
		name   string
		byArgs bool
		ok     bool
	}
	is := map[int32]info{}
	for pid, p := range t.byPID {
		n, a, ok := m.compilerName(p)
		is[pid] = info{n, a, ok}
	}
	// owner: the nearest compiler ancestor-or-self.
	owner := func(pid int32) (int32, bool) {
		seen := map[int32]bool{}
		for q := pid; q > 0 && !seen[q]; {
			seen[q] = true
			if is[q].ok {
				return q, true
			}
			p := t.byPID[q]
			if p == nil {
				break
			}
			q = p.PPID
		}
		return 0, false
	}
	type total struct {
		runs  int
		cpu   int64
		spans []span
	}
	totals := map[string]*total{}
	get := func(n string) *total {
		if totals[n] == nil {
			totals[n] = &total{}
		}
		return totals[n]
	}
	var windows []record.JITWindow
	var runs []compilerRun
	pids := make([]int32, 0, len(t.byPID))
	for pid := range t.byPID {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	subCPU := map[int32]int64{} // CPU of each topmost compiler's subtree
	for _, pid := range pids {
		p := t.byPID[pid]
		o, ok := owner(pid)
		if !ok {
			continue
		}
		get(is[o].name).cpu += p.CPUNS
		top := o
		for {
			pp := t.byPID[top]
			if pp == nil {
				break
			}
			up, ok := owner(pp.PPID)
			if !ok || up == top {
				break
			}
			top = up
		}
		subCPU[top] += p.CPUNS
		if is[pid].ok {
			tt := get(is[pid].name)
			tt.runs++
			tt.spans = append(tt.spans, span{p.StartNS, t.subtreeEnd(pid)})
		}
		// Argument-matched workers: a window for each process of the
		// subtree, unless a name-matched compiler covers it.
		if is[o].byArgs && !is[pid].ok || is[pid].byArgs {
			name := is[o].name
			windows = append(windows, record.JITWindow{PID: pid, StartNS: p.StartNS, EndNS: t.end(p),
				Kind: "compiler", Source: name, CPUNS: p.CPUNS})
		}
	}
	for _, pid := range pids {
		if !is[pid].ok {
			continue
		}
		p := t.byPID[pid]
		if pp := t.byPID[p.PPID]; pp != nil {
			if _, ok := owner(p.PPID); ok {
				continue // not topmost
			}
		}
		sp := span{p.StartNS, t.subtreeEnd(pid)}
		runs = append(runs, compilerRun{pid: pid, name: is[pid].name, span: sp})
		if !is[pid].byArgs {
			windows = append(windows, record.JITWindow{PID: pid, StartNS: sp.start, EndNS: sp.end,
				Kind: "compiler", Source: is[pid].name, CPUNS: subCPU[pid]})
		}
	}
	var list []record.Compiler
	for n, tt := range totals {
		if tt.runs == 0 {
			continue
		}
		list = append(list, record.Compiler{Name: n, Runs: tt.runs, WallNS: unionLen(tt.spans), CPUNS: tt.cpu})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].WallNS != list[j].WallNS {
			return list[i].WallNS > list[j].WallNS
		}
		return list[i].Name < list[j].Name
	})
	return list, windows, runs
}
