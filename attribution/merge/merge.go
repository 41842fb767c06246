// Package merge joins the records of the ranks (or nodes) of one job
// into one answer: each rank's breakdown, the slowest rank and why it was
// slower than the median rank (a comparison of the two, as data), and
// which causes of a cold start all ranks shared and which only some had.
// Pure Go: records in, data out; report/merge says it in words.
package merge

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record"
)

// Input is one rank's record; Source names it for messages (its file).
// Result is its attribution (nil: computed here).
type Input struct {
	Source string
	Record *record.Record
	Result *attribution.Result
}

// Job is the merged answer.
type Job struct {
	// Ranks in rank order (numeric rank labels), else by name.
	Ranks []Rank `json:"ranks"`
	// Slowest and Median are indexes into Ranks: the rank with the
	// longest wall time, and the median rank by wall time (the lower
	// middle one for an even count).
	Slowest int `json:"slowest"`
	Median  int `json:"median"`
	// Why compares the median rank (A) with the slowest (B); nil with
	// fewer than two ranks.
	Why *compare.Verdict `json:"why,omitempty"`
	// Common are causes every rank had; Particular, causes only some had.
	Common     []Cause  `json:"common"`
	Particular []Cause  `json:"particular"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Rank is one rank's run.
type Rank struct {
	Name    string              `json:"name"`
	Source  string              `json:"source"`
	Labels  map[string]string   `json:"labels,omitempty"`
	Host    string              `json:"host"`
	Command []string            `json:"command"`
	WallNS  int64               `json:"wall_ns"`
	Cold    bool                `json:"cold"`
	Rows    []attribution.Share `json:"breakdown"`
	Verdict attribution.Verdict `json:"verdict"`
	Causes  []Cause             `json:"causes,omitempty"`
	result  *attribution.Result // for the comparison
	record  *record.Record
}

// CauseKind says what kind of cold-start cause a Cause is.
type CauseKind string

// The cause kinds.
const (
	// PageCache: a file read mostly from disk (not in the page cache).
	PageCache CauseKind = "page_cache"
	// ColdCache: a kernel/JIT cache whose lookups mostly missed.
	ColdCache CauseKind = "cold_cache"
	// Downloaded: a file fetched over the network during the run.
	Downloaded CauseKind = "download"
)

// Cause is one reason for avoidable time. In a Rank, NS is that rank's
// time for it; in Job.Common and Job.Particular, NS sums the ranks that
// had it and Ranks names them.
type Cause struct {
	Kind  CauseKind `json:"kind"`
	Name  string    `json:"name"`
	NS    int64     `json:"ns"`
	Ranks []string  `json:"ranks,omitempty"`
}

// Thresholds for a cause: a file counts when it cost at least minShare
// of the rank's wall time (or minNS) and at least half of its accessed
// pages missed; a cache when it missed at least once and more often than
// it hit.
const (
	minShare = 0.01
	minNS    = 1_000_000
)

// Merge merges the ranks' records. It needs at least one input.
func Merge(inputs []Input) (*Job, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("merge: no records")
	}
	job := &Job{Common: []Cause{}, Particular: []Cause{}}
	for _, in := range inputs {
		if in.Record == nil {
			return nil, fmt.Errorf("merge: %s: no record", in.Source)
		}
		res := in.Result
		if res == nil {
			res = attribution.Analyze(in.Record)
		}
		job.Ranks = append(job.Ranks, newRank(in, res))
	}
	nameRanks(job.Ranks)
	sortRanks(job.Ranks)
	job.Warnings = warnings(job.Ranks)

	byWall := make([]int, len(job.Ranks))
	for i := range byWall {
		byWall[i] = i
	}
	slices.SortStableFunc(byWall, func(a, b int) int { return cmp.Compare(job.Ranks[a].WallNS, job.Ranks[b].WallNS) })
	job.Median = byWall[(len(byWall)-1)/2]
	job.Slowest = byWall[len(byWall)-1]
	if len(job.Ranks) > 1 {
		m, s := job.Ranks[job.Median], job.Ranks[job.Slowest]
		v := compare.New(m.record, s.record, m.result, s.result).Verdict
		keepCostlyFiles(&v, s.Causes)
		job.Why = &v
	}
	job.Common, job.Particular = causes(job.Ranks)
	return job, nil
}

func newRank(in Input, res *attribution.Result) Rank {
	r := in.Record
	rk := Rank{Source: in.Source, Labels: r.Labels, Host: r.Host.Hostname, Command: r.Command,
		WallNS: res.WallNS, Cold: res.Cold, Verdict: res.Verdict, result: res, record: r}
	if h := r.Labels["host"]; h != "" {
		rk.Host = h
	}
	for _, row := range res.Breakdown {
		rk.Rows = append(rk.Rows, attribution.Share{Category: row.Category, NS: row.NS, Share: row.Share})
	}
	rk.Causes = rankCauses(r, res)
	return rk
}

// rankCauses lists a rank's cold-start causes, heaviest first.
func rankCauses(r *record.Record, res *attribution.Result) []Cause {
	var out []Cause
	floor := max(int64(float64(res.WallNS)*minShare), minNS)
	if row := res.Row(attribution.DiskRead); row != nil {
		for _, f := range row.Files {
			if f.ID >= 0 && f.NS >= floor && f.MissRatio >= 0.5 {
				out = append(out, Cause{Kind: PageCache, Name: f.Path, NS: f.NS})
			}
		}
	}
	if r.JIT != nil {
		for _, c := range r.JIT.Caches {
			if c.Misses > 0 && c.Misses > c.Hits {
				out = append(out, Cause{Kind: ColdCache, Name: c.Name, NS: c.CompileNS})
			}
		}
	}
	if row := res.Row(attribution.Download); row != nil {
		for _, d := range row.Downloads {
			if d.NS > 0 {
				out = append(out, Cause{Kind: Downloaded, Name: d.Path, NS: d.NS})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Cause) int { return cmp.Compare(b.NS, a.NS) })
	return out
}

// keepCostlyFiles narrows the disk_read reason to the files that were
// causes on the slowest rank (compare lists every file that became
// uncached, a few pages of libc included), when any of them is one.
func keepCostlyFiles(v *compare.Verdict, causes []Cause) {
	costly := map[string]bool{}
	for _, c := range causes {
		if c.Kind == PageCache {
			costly[c.Name] = true
		}
	}
	for i := range v.With {
		ch := &v.With[i]
		if ch.Category != attribution.DiskRead {
			continue
		}
		var keep []string
		for _, f := range ch.Files {
			if costly[f] {
				keep = append(keep, f)
			}
		}
		if len(keep) > 0 {
			ch.Files = keep
		}
	}
}

// nameRanks names each rank by its rank label ("rank 3"), else its host
// label or host name, else its file; names that still collide get their
// file appended.
func nameRanks(ranks []Rank) {
	count := map[string]int{}
	for i := range ranks {
		r := &ranks[i]
		switch {
		case r.Labels["rank"] != "":
			r.Name = "rank " + r.Labels["rank"]
		case r.Host != "":
			r.Name = r.Host
		default:
			r.Name = filepath.Base(r.Source)
		}
		count[r.Name]++
	}
	for i := range ranks {
		if count[ranks[i].Name] > 1 {
			ranks[i].Name += " (" + filepath.Base(ranks[i].Source) + ")"
		}
	}
}

// sortRanks orders ranks by numeric rank label when every rank has one,
// else by name.
func sortRanks(ranks []Rank) {
	numeric := true
	for _, r := range ranks {
		if _, err := strconv.Atoi(r.Labels["rank"]); err != nil {
			numeric = false
			break
		}
	}
	slices.SortStableFunc(ranks, func(a, b Rank) int {
		if numeric {
			x, _ := strconv.Atoi(a.Labels["rank"])
			y, _ := strconv.Atoi(b.Labels["rank"])
			return cmp.Compare(x, y)
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// warnings says what makes the merge doubtful: records of different
// commands or of different jobs.
func warnings(ranks []Rank) []string {
	var out []string
	if w := differ(ranks, "commands", func(r Rank) string { return strings.Join(r.Command, " ") }); w != "" {
		out = append(out, w)
	}
	if w := differ(ranks, "jobs", func(r Rank) string { return r.Labels["job"] }); w != "" {
		out = append(out, w)
	}
	return out
}

func differ(ranks []Rank, what string, key func(Rank) string) string {
	groups := map[string][]string{}
	var order []string
	for _, r := range ranks {
		k := key(r)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r.Name)
	}
	if len(order) < 2 {
		return ""
	}
	parts := make([]string, len(order))
	for i, k := range order {
		if k == "" {
			k = "(none)"
		}
		parts[i] = fmt.Sprintf("%q (%s)", k, strings.Join(groups[k], ", "))
	}
	return fmt.Sprintf("records of different %s: %s; their comparison may mean little", what, strings.Join(parts, ", "))
}

// causes splits the ranks' causes into those every rank had and those
// only some had, each heaviest first.
func causes(ranks []Rank) (common, particular []Cause) {
	type key struct {
		kind CauseKind
		name string
	}
	agg := map[key]*Cause{}
	var order []key
	for _, r := range ranks {
		for _, c := range r.Causes {
			k := key{c.Kind, c.Name}
			a := agg[k]
			if a == nil {
				a = &Cause{Kind: c.Kind, Name: c.Name}
				agg[k] = a
				order = append(order, k)
			}
			if !slices.Contains(a.Ranks, r.Name) {
				a.Ranks = append(a.Ranks, r.Name)
			}
			a.NS += c.NS
		}
	}
	common, particular = []Cause{}, []Cause{}
	for _, k := range order {
		c := *agg[k]
		if len(c.Ranks) == len(ranks) {
			common = append(common, c)
		} else {
			particular = append(particular, c)
		}
	}
	byNS := func(a, b Cause) int { return cmp.Compare(b.NS, a.NS) }
	slices.SortStableFunc(common, byNS)
	slices.SortStableFunc(particular, byNS)
	return common, particular
}
