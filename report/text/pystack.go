package text

import (
	"fmt"
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// maxCallSites is how many call sites a category lists.
const maxCallSites = 5

// whereSection names the lines of the user's Python code that ran the
// compilers: each compiler process's stack (the Python thread that
// forked it or an ancestor), grouped by call site, most compile time
// first. Empty when no compiler process carries a stack.
func whereSection(r *record.Record) string {
	if r == nil || r.JIT == nil || len(r.Stacks) == 0 {
		return ""
	}
	procs := map[int32]*record.Process{}
	for i := range r.Processes {
		procs[r.Processes[i].PID] = &r.Processes[i]
	}
	type site struct {
		name  string
		runs  int
		wall  int64
		procs map[int32]bool
	}
	sites := map[string]*site{}
	for _, w := range r.JIT.Windows {
		if w.Kind != "compiler" {
			continue
		}
		name := format.CallSite(r.StackOf(procs[w.PID]))
		if name == "" {
			continue
		}
		s := sites[name]
		if s == nil {
			s = &site{name: name, procs: map[int32]bool{}}
			sites[name] = s
		}
		if !s.procs[w.PID] {
			s.procs[w.PID] = true
			s.runs++
		}
		s.wall += w.EndNS - w.StartNS
	}
	if len(sites) == 0 {
		return ""
	}
	list := make([]*site, 0, len(sites))
	for _, s := range sites {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].wall != list[j].wall {
			return list[i].wall > list[j].wall
		}
		return list[i].name < list[j].name
	})
	var b strings.Builder
	b.WriteString("where in the code: compiles\n")
	for i, s := range list {
		if i == maxCallSites {
			fmt.Fprintf(&b, "  … %d more call sites (see the record's stacks)\n", len(list)-i)
			break
		}
		fmt.Fprintf(&b, "  %s  %s, %d %s\n", s.name, format.Duration(s.wall), s.runs, plural(s.runs, "run", "runs"))
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
