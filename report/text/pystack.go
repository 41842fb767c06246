package text

import (
	"fmt"
	"sort"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// writeWhere writes the "where in the code" sections: compiles, cache
// lookups, disk reads, downloads, each only when it names a call site.
func writeWhere(b *strings.Builder, r *record.Record, res *attribution.Result) {
	for _, where := range []string{whereSection(r, res), whereCachesSection(r), whereReadsSection(r, res), whereDownloadsSection(r)} {
		if where != "" {
			b.WriteString("\n")
			b.WriteString(where)
		}
	}
}

// maxCallSites is how many call sites a category lists.
const maxCallSites = 5

// whereSection names the lines of the user's Python code that ran the
// compilers: each compiler process's stack (the Python thread that
// forked it or an ancestor) and each in-process compile's (the thread's
// at the compile call or the cache miss), grouped by call site, most
// compile time first. Empty when no compile carries a stack.
func whereSection(r *record.Record, res *attribution.Result) string {
	if r == nil || r.JIT == nil || len(r.Stacks) == 0 {
		return ""
	}
	procs := map[int32]*record.Process{}
	for i := range r.Processes {
		procs[r.Processes[i].PID] = &r.Processes[i]
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
	inProcessSites(r, res, sites)
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
		if s.runs == 0 {
			fmt.Fprintf(&b, "  %s  %s in process\n", s.name, format.Duration(s.wall))
			continue
		}
		fmt.Fprintf(&b, "  %s  %s, %d %s\n", s.name, format.Duration(s.wall), s.runs, plural(s.runs, "run", "runs"))
	}
	return b.String()
}

// site is one call site's compiles: runs counts compiler processes.
type site struct {
	name  string
	runs  int
	wall  int64
	procs map[int32]bool
}

// inProcessSites adds to sites the JIT row's in-process compile time by
// its windows' stacks (attribution's CompilerEvidence.Stacks).
func inProcessSites(r *record.Record, res *attribution.Result, sites map[string]*site) {
	if res == nil {
		return
	}
	row := res.Row(attribution.JITCompile)
	if row == nil {
		return
	}
	for _, ce := range row.Compilers {
		for _, sh := range ce.Stacks {
			name := format.CallSite(r.StackAt(sh.Stack))
			if name == "" || sh.NS <= 0 {
				continue
			}
			s := sites[name]
			if s == nil {
				s = &site{name: name, procs: map[int32]bool{}}
				sites[name] = s
			}
			s.wall += sh.NS
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// maxHotFiles is how many files get call sites of their own.
const maxHotFiles = 3

// readSite is one call site's part of the disk reads.
type readSite struct {
	name  string
	ns    int64
	bytes uint64
}

// whereReadsSection names the lines of the user's Python code whose
// kernel entries filled the page cache: call sites by their part of the
// disk-read row (each file's time split over its stacks by thread time),
// over all files, then for each of the hottest files. Empty when no file
// carries a stack.
func whereReadsSection(r *record.Record, res *attribution.Result) string {
	if r == nil || res == nil || len(r.Stacks) == 0 {
		return ""
	}
	var files []attribution.FileEvidence
	for _, row := range res.Breakdown {
		for _, fe := range row.Files {
			if len(fe.Stacks) > 0 {
				files = append(files, fe)
			}
		}
	}
	all := sitesOf(r, files)
	if len(all) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("where in the code: disk reads\n")
	writeSites(&b, "  ", all)
	for i, fe := range files {
		if i == maxHotFiles {
			break
		}
		sites := sitesOf(r, files[i:i+1])
		if len(sites) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  %s\n", format.Escape(fe.Path))
		writeSites(&b, "    ", sites)
		if fe.NoStackNS > 0 && fe.NoStackNS*100 >= fe.NS {
			fmt.Fprintf(&b, "    (no Python stack: waits outside a fill, other threads)  %s\n", format.Duration(fe.NoStackNS))
		}
	}
	return b.String()
}

// sitesOf sums files' stack shares by call site, most time first; a
// stack without a frame of the user's own is named by its innermost
// frame.
func sitesOf(r *record.Record, files []attribution.FileEvidence) []*readSite {
	by := map[string]*readSite{}
	for _, fe := range files {
		for _, sh := range fe.Stacks {
			st := r.StackAt(sh.Stack)
			name := format.CallSite(st)
			if name == "" && st != nil && len(st.Frames) > 0 {
				f := st.Frames[0]
				name = format.Escape(fmt.Sprintf("%s:%d %s", f.File, f.Line, f.Func))
			}
			if name == "" {
				continue
			}
			s := by[name]
			if s == nil {
				s = &readSite{name: name}
				by[name] = s
			}
			s.ns += sh.NS
			s.bytes += sh.Bytes
		}
	}
	list := make([]*readSite, 0, len(by))
	for _, s := range by {
		list = append(list, s)
	}
	sortSites(list)
	return list
}

// sortSites orders call sites by time, then bytes, then name.
func sortSites(list []*readSite) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].ns != list[j].ns {
			return list[i].ns > list[j].ns
		}
		if list[i].bytes != list[j].bytes {
			return list[i].bytes > list[j].bytes
		}
		return list[i].name < list[j].name
	})
}

func writeSites(b *strings.Builder, indent string, list []*readSite) {
	for i, s := range list {
		if i == maxCallSites {
			fmt.Fprintf(b, "%s… %d more call sites (see the record's stacks)\n", indent, len(list)-i)
			break
		}
		fmt.Fprintf(b, "%s%s  %s, %s\n", indent, s.name, format.Duration(s.ns), format.Bytes(s.bytes))
	}
}

// whereDownloadsSection names the lines of the user's Python code that
// opened the downloads' connections, by download time (each download's
// time split over its stacks by their connections' receive time).
func whereDownloadsSection(r *record.Record) string {
	if r == nil || len(r.Stacks) == 0 {
		return ""
	}
	by := map[string]*readSite{}
	for _, d := range r.Downloads {
		var sum int64
		for _, sc := range d.Stacks {
			sum += max(sc.NS, 0)
		}
		span := max(d.EndNS-d.StartNS, 0)
		for _, sc := range d.Stacks {
			name := format.CallSite(r.StackAt(sc.Stack))
			if name == "" {
				continue
			}
			s := by[name]
			if s == nil {
				s = &readSite{name: name}
				by[name] = s
			}
			if sum > 0 {
				s.ns += int64(float64(span) * float64(max(sc.NS, 0)) / float64(sum))
			}
			s.bytes += sc.Bytes
		}
	}
	if len(by) == 0 {
		return ""
	}
	list := make([]*readSite, 0, len(by))
	for _, s := range by {
		list = append(list, s)
	}
	sortSites(list)
	var b strings.Builder
	b.WriteString("where in the code: downloads\n")
	writeSites(&b, "  ", list)
	return b.String()
}

// whereCachesSection names, for each kernel cache whose lookups carry
// stacks, the lines of the user's Python code that looked it up: their
// misses, the misses' compile time and their hits, most time first.
func whereCachesSection(r *record.Record) string {
	if r == nil || r.JIT == nil || len(r.Stacks) == 0 {
		return ""
	}
	var b strings.Builder
	for _, c := range r.JIT.Caches {
		type line struct {
			name         string
			ns           int64
			misses, hits uint64
		}
		by := map[string]*line{}
		var list []*line
		for _, sc := range c.Stacks {
			name := format.CallSite(r.StackAt(sc.Stack))
			if name == "" {
				continue
			}
			l := by[name]
			if l == nil {
				l = &line{name: name}
				by[name] = l
				list = append(list, l)
			}
			l.ns += sc.NS
			l.misses += sc.Misses
			l.hits += sc.Hits
		}
		if len(list) == 0 {
			continue
		}
		sort.SliceStable(list, func(i, j int) bool {
			if list[i].ns != list[j].ns {
				return list[i].ns > list[j].ns
			}
			return list[i].misses+list[i].hits > list[j].misses+list[j].hits
		})
		if b.Len() == 0 {
			b.WriteString("where in the code: cache lookups\n")
		}
		fmt.Fprintf(&b, "  %s (%s)\n", format.Escape(c.Name), format.Escape(c.Root))
		for i, l := range list {
			if i == maxCallSites {
				fmt.Fprintf(&b, "    … %d more call sites (see the record's stacks)\n", len(list)-i)
				break
			}
			fmt.Fprintf(&b, "    %s  %d %s", l.name, l.misses, plural(int(l.misses), "miss", "misses"))
			if l.ns > 0 {
				fmt.Fprintf(&b, " (%s compiling)", format.Duration(l.ns))
			}
			fmt.Fprintf(&b, ", %d %s\n", l.hits, plural(int(l.hits), "hit", "hits"))
		}
	}
	return b.String()
}
