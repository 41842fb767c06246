package attribution

import (
	"cmp"
	"slices"

	"github.com/coldtrace/coldtrace/record"
)

// CallSiteTime is one call site's part of one category of a run: the
// innermost frame of the user's own Python code (record.PyStack.SiteName)
// behind disk reads (the files' parts of the disk_read row split over
// their stacks), compiles (compiler runs by the stack that started them,
// in-process compiles by their windows' stacks) and downloads (their spans split over their connections' stacks).
type CallSiteTime struct {
	Category Category `json:"category"`
	Site     string   `json:"site"`
	NS       int64    `json:"ns"`
}

// CallSiteTimes lists r's call sites by category, most time first.
func CallSiteTimes(r *record.Record, res *Result) []CallSiteTime {
	if r == nil || res == nil || len(r.Stacks) == 0 {
		return nil
	}
	type key struct {
		c    Category
		site string
	}
	sum := map[key]int64{}
	add := func(c Category, stack int, ns int64) {
		if site := r.StackAt(stack).SiteName(); site != "" && ns > 0 {
			sum[key{c, site}] += ns
		}
	}
	if row := res.Row(DiskRead); row != nil {
		for _, fe := range row.Files {
			for _, sh := range fe.Stacks {
				add(DiskRead, sh.Stack, sh.NS)
			}
		}
	}
	if row := res.Row(JITCompile); row != nil {
		// In-process compiles: the stacks of their windows.
		for _, ce := range row.Compilers {
			for _, sh := range ce.Stacks {
				add(JITCompile, sh.Stack, sh.NS)
			}
		}
	}
	if r.JIT != nil {
		stackOf := map[int32]int{}
		for _, p := range r.Processes {
			stackOf[p.PID] = p.Stack
		}
		for _, w := range r.JIT.Windows {
			if w.Kind == "compiler" {
				add(JITCompile, stackOf[w.PID], w.EndNS-w.StartNS)
			}
		}
	}
	for _, d := range r.Downloads {
		var total int64
		for _, sc := range d.Stacks {
			total += max(sc.NS, 0)
		}
		for _, sc := range d.Stacks {
			if total > 0 {
				add(Download, sc.Stack, int64(float64(max(d.EndNS-d.StartNS, 0))*float64(max(sc.NS, 0))/float64(total)))
			}
		}
	}
	out := make([]CallSiteTime, 0, len(sum))
	for k, ns := range sum {
		out = append(out, CallSiteTime{Category: k.c, Site: k.site, NS: ns})
	}
	slices.SortFunc(out, func(x, y CallSiteTime) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(x.Category, y.Category), cmp.Compare(x.Site, y.Site))
	})
	return out
}
