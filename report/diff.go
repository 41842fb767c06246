package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// DiffSchema names the JSON format of `coldtrace diff --json`.
const DiffSchema = "coldtrace.diff/v1"

// Diff compares two runs, A (typically the cold one) and B. Every delta
// is B minus A: negative when B spent less. Each breakdown sums to its
// run's wall time, so the categories' deltas sum to DeltaNS exactly.
type Diff struct {
	Schema string  `json:"schema"`
	A      DiffRun `json:"a"`
	B      DiffRun `json:"b"`
	// DeltaNS is B's wall time minus A's.
	DeltaNS   int64          `json:"delta_ns"`
	Breakdown []DiffCategory `json:"breakdown"`
	Files     []DiffFile     `json:"files"`
	Caches    []DiffCache    `json:"caches"`
	Compilers []DiffCompiler `json:"compilers"`
	GPUs      []DiffGPU      `json:"gpus"`
	Downloads []DiffDownload `json:"downloads"`
	// Warnings say why the two runs may not be comparable: other hosts,
	// other commands, lost events.
	Warnings []string `json:"warnings,omitempty"`
	Verdict  string   `json:"verdict"`
}

// DiffRun describes one side.
type DiffRun struct {
	Command       []string  `json:"command"`
	Host          string    `json:"host"`
	Kernel        string    `json:"kernel,omitempty"`
	Start         time.Time `json:"start"`
	WallNS        int64     `json:"wall_ns"`
	ExitCode      int       `json:"exit_code"`
	Cold          bool      `json:"cold"`
	BytesFromDisk uint64    `json:"bytes_from_disk"`
	PagesMissed   uint64    `json:"pages_missed"`
	LostEvents    uint64    `json:"lost_events"`
	// Verdict is the run's own verdict.
	Verdict string `json:"verdict"`
}

// DiffCategory is one breakdown row on both sides.
type DiffCategory struct {
	Category attribution.Category `json:"category"`
	ANS      int64                `json:"a_ns"`
	BNS      int64                `json:"b_ns"`
	DeltaNS  int64                `json:"delta_ns"`
}

// Change values of a DiffFile.
const (
	FileCached       = "cached"         // missed in A, (almost) all hits in B
	FileUncached     = "not cached"     // (almost) all hits in A, missed in B
	FileMissedInBoth = "missed in both" // came from disk both times
	FileCachedInBoth = "cached in both" // no page came from disk
	FileOnlyInA      = "only in A"
	FileOnlyInB      = "only in B"
)

// DiffFile is one file, matched by path.
type DiffFile struct {
	Path           string `json:"path"`
	APagesAccessed uint64 `json:"a_pages_accessed"`
	BPagesAccessed uint64 `json:"b_pages_accessed"`
	APagesMissed   uint64 `json:"a_pages_missed"`
	BPagesMissed   uint64 `json:"b_pages_missed"`
	ABytesFromDisk uint64 `json:"a_bytes_from_disk"`
	BBytesFromDisk uint64 `json:"b_bytes_from_disk"`
	// A/BDiskNS are the file's part of the disk_read row.
	ADiskNS int64 `json:"a_disk_ns"`
	BDiskNS int64 `json:"b_disk_ns"`
	// A/BIOWaitNS are thread-time blocked on I/O for the file.
	AIOWaitNS int64  `json:"a_io_wait_ns"`
	BIOWaitNS int64  `json:"b_io_wait_ns"`
	Change    string `json:"change"`

	inA, inB bool
}

// DiffCache is one kernel/JIT cache, matched by name.
type DiffCache struct {
	Name            string `json:"name"`
	Root            string `json:"root"`
	ALookups        uint64 `json:"a_lookups"`
	BLookups        uint64 `json:"b_lookups"`
	AMisses         uint64 `json:"a_misses"`
	BMisses         uint64 `json:"b_misses"`
	AHits           uint64 `json:"a_hits"`
	BHits           uint64 `json:"b_hits"`
	AEntriesWritten uint64 `json:"a_entries_written"`
	BEntriesWritten uint64 `json:"b_entries_written"`
	// A/BCompileNS are the compile time the record files under the
	// cache (its compile_ns).
	ACompileNS int64 `json:"a_compile_ns"`
	BCompileNS int64 `json:"b_compile_ns"`
	// BecameHits counts A's misses that B found in the cache: B's extra
	// hits, at most A's misses.
	BecameHits uint64 `json:"became_hits"`
}

// DiffCompiler is one source of compile time (a compiler program, or a
// JIT window source), matched by kind and name.
type DiffCompiler struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	ARuns  int    `json:"a_runs"`
	BRuns  int    `json:"b_runs"`
	ACPUNS int64  `json:"a_cpu_ns"`
	BCPUNS int64  `json:"b_cpu_ns"`
	// A/BNS are its part of the jit_compile row.
	ANS int64 `json:"a_ns"`
	BNS int64 `json:"b_ns"`
}

// DiffGPU is one GPU, matched by index.
type DiffGPU struct {
	Index          int     `json:"index"`
	Name           string  `json:"name"`
	AUtilMeanPct   float64 `json:"a_util_mean_pct"`
	BUtilMeanPct   float64 `json:"b_util_mean_pct"`
	ABusyNS        int64   `json:"a_busy_ns"`
	BBusyNS        int64   `json:"b_busy_ns"`
	AVRAMPeakBytes uint64  `json:"a_vram_peak_bytes"`
	BVRAMPeakBytes uint64  `json:"b_vram_peak_bytes"`
	// A/BNS are its part of the gpu_compute row.
	ANS int64 `json:"a_ns"`
	BNS int64 `json:"b_ns"`
}

// DiffDownload is one fetched path, matched by path.
type DiffDownload struct {
	Path   string `json:"path"`
	ABytes uint64 `json:"a_bytes"`
	BBytes uint64 `json:"b_bytes"`
	ANS    int64  `json:"a_ns"`
	BNS    int64  `json:"b_ns"`
}

// NewDiff compares records a and b. ra and rb are their attributions;
// nil means attribution.Analyze.
func NewDiff(a, b *record.Record, ra, rb *attribution.Result) *Diff {
	if a == nil {
		a = &record.Record{}
	}
	if b == nil {
		b = &record.Record{}
	}
	if ra == nil {
		ra = attribution.Analyze(a)
	}
	if rb == nil {
		rb = attribution.Analyze(b)
	}
	d := &Diff{Schema: DiffSchema, A: diffRun(a, ra), B: diffRun(b, rb), DeltaNS: rb.WallNS - ra.WallNS}
	for _, c := range attribution.Categories {
		var an, bn int64
		if row := ra.Row(c); row != nil {
			an = row.NS
		}
		if row := rb.Row(c); row != nil {
			bn = row.NS
		}
		d.Breakdown = append(d.Breakdown, DiffCategory{Category: c, ANS: an, BNS: bn, DeltaNS: bn - an})
	}
	d.Files = diffFiles(a, b, ra, rb)
	d.Caches = diffCaches(a, b)
	d.Compilers = diffCompilers(ra, rb)
	d.GPUs = diffGPUs(ra, rb)
	d.Downloads = diffDownloads(ra, rb)
	d.Warnings = diffWarnings(a, b)
	d.Verdict = d.verdict()
	return d
}

func diffRun(r *record.Record, res *attribution.Result) DiffRun {
	out := DiffRun{Command: r.Command, Host: r.Host.Hostname, Kernel: r.Host.Kernel, Start: r.Start,
		WallNS: res.WallNS, ExitCode: r.ExitCode, Cold: res.Cold, LostEvents: r.Lost.Total(), Verdict: res.Verdict}
	if out.Command == nil {
		out.Command = []string{}
	}
	for _, f := range r.Files {
		out.BytesFromDisk += f.BytesFromDisk
		out.PagesMissed += f.PagesMissed
	}
	return out
}

func diffFileKey(f record.File) string {
	if f.Path != "" {
		return f.Path
	}
	return fmt.Sprintf("(dev %d:%d inode %d)", f.Dev>>20, f.Dev&(1<<20-1), f.Ino)
}

// rowsByKey collects diff rows by key, in the order keys are first seen.
type rowsByKey[V any] struct {
	idx  map[string]int
	rows []V
}

// get returns the row of key, made by fresh when the key is new.
func (r *rowsByKey[V]) get(key string, fresh func() V) *V {
	if r.idx == nil {
		r.idx = map[string]int{}
	}
	i, ok := r.idx[key]
	if !ok {
		i = len(r.rows)
		r.idx[key] = i
		r.rows = append(r.rows, fresh())
	}
	return &r.rows[i]
}

func diffFiles(a, b *record.Record, ra, rb *attribution.Result) []DiffFile {
	var rows rowsByKey[DiffFile]
	get := func(key string) *DiffFile { return rows.get(key, func() DiffFile { return DiffFile{Path: key} }) }
	diskNS := func(res *attribution.Result) map[int]int64 {
		m := map[int]int64{}
		if row := res.Row(attribution.DiskRead); row != nil {
			for _, f := range row.Files {
				m[f.ID] += f.NS
			}
		}
		return m
	}
	an, bn := diskNS(ra), diskNS(rb)
	for _, f := range a.Files {
		df := get(diffFileKey(f))
		df.inA = true
		df.APagesAccessed += f.PagesAccessed
		df.APagesMissed += f.PagesMissed
		df.ABytesFromDisk += f.BytesFromDisk
		df.AIOWaitNS += f.IOWaitNS
		df.ADiskNS += an[f.ID]
	}
	for _, f := range b.Files {
		df := get(diffFileKey(f))
		df.inB = true
		df.BPagesAccessed += f.PagesAccessed
		df.BPagesMissed += f.PagesMissed
		df.BBytesFromDisk += f.BytesFromDisk
		df.BIOWaitNS += f.IOWaitNS
		df.BDiskNS += bn[f.ID]
	}
	if n, m := an[-1], bn[-1]; n != 0 || m != 0 {
		df := get("(file not identified)")
		df.inA, df.inB = n != 0, m != 0
		df.ADiskNS, df.BDiskNS = n, m
	}
	out := rows.rows
	for i := range out {
		f := &out[i]
		switch {
		case !f.inB:
			f.Change = FileOnlyInA
		case !f.inA:
			f.Change = FileOnlyInB
		case f.APagesMissed == 0 && f.BPagesMissed == 0:
			f.Change = FileCachedInBoth
		case f.APagesMissed > 0 && f.BPagesMissed*10 <= f.APagesMissed:
			f.Change = FileCached
		case f.BPagesMissed > 0 && f.APagesMissed*10 <= f.BPagesMissed:
			f.Change = FileUncached
		default:
			f.Change = FileMissedInBoth
		}
	}
	// Heaviest change in disk time first, then in bytes from disk.
	slices.SortStableFunc(out, func(x, y DiffFile) int {
		return cmp.Or(cmp.Compare(absI(y.BDiskNS-y.ADiskNS), absI(x.BDiskNS-x.ADiskNS)),
			cmp.Compare(absU(y.BBytesFromDisk, y.ABytesFromDisk), absU(x.BBytesFromDisk, x.ABytesFromDisk)),
			cmp.Compare(max(y.APagesMissed, y.BPagesMissed), max(x.APagesMissed, x.BPagesMissed)),
			cmp.Compare(x.Path, y.Path))
	})
	if out == nil {
		out = []DiffFile{}
	}
	return out
}

func absI(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func absU(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

func diffCaches(a, b *record.Record) []DiffCache {
	var rows rowsByKey[DiffCache]
	get := func(name, root string) *DiffCache {
		return rows.get(name, func() DiffCache { return DiffCache{Name: name, Root: root} })
	}
	if a.JIT != nil {
		for _, c := range a.JIT.Caches {
			dc := get(c.Name, c.Root)
			dc.ALookups += c.Lookups
			dc.AMisses += c.Misses
			dc.AHits += c.Hits
			dc.AEntriesWritten += c.EntriesWritten
			dc.ACompileNS += c.CompileNS
		}
	}
	if b.JIT != nil {
		for _, c := range b.JIT.Caches {
			dc := get(c.Name, c.Root)
			dc.BLookups += c.Lookups
			dc.BMisses += c.Misses
			dc.BHits += c.Hits
			dc.BEntriesWritten += c.EntriesWritten
			dc.BCompileNS += c.CompileNS
		}
	}
	out := rows.rows
	for i := range out {
		c := &out[i]
		if c.BHits > c.AHits {
			c.BecameHits = min(c.BHits-c.AHits, c.AMisses)
		}
	}
	slices.SortStableFunc(out, func(x, y DiffCache) int {
		return cmp.Or(cmp.Compare(y.BecameHits, x.BecameHits), cmp.Compare(absI(y.BCompileNS-y.ACompileNS), absI(x.BCompileNS-x.ACompileNS)),
			cmp.Compare(max(y.AMisses, y.BMisses), max(x.AMisses, x.BMisses)), cmp.Compare(x.Name, y.Name))
	})
	if out == nil {
		out = []DiffCache{}
	}
	return out
}

func diffCompilers(ra, rb *attribution.Result) []DiffCompiler {
	type key struct{ kind, name string }
	idx := map[key]int{}
	var out []DiffCompiler
	get := func(kind, name string) *DiffCompiler {
		k := key{kind, name}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, DiffCompiler{Kind: kind, Name: name})
		}
		return &out[i]
	}
	if row := ra.Row(attribution.JITCompile); row != nil {
		for _, c := range row.Compilers {
			dc := get(c.Kind, c.Name)
			dc.ARuns, dc.ACPUNS, dc.ANS = dc.ARuns+c.Runs, dc.ACPUNS+c.CPUNS, dc.ANS+c.NS
		}
	}
	if row := rb.Row(attribution.JITCompile); row != nil {
		for _, c := range row.Compilers {
			dc := get(c.Kind, c.Name)
			dc.BRuns, dc.BCPUNS, dc.BNS = dc.BRuns+c.Runs, dc.BCPUNS+c.CPUNS, dc.BNS+c.NS
		}
	}
	slices.SortStableFunc(out, func(x, y DiffCompiler) int {
		return cmp.Or(cmp.Compare(absI(y.BNS-y.ANS), absI(x.BNS-x.ANS)), cmp.Compare(absI(y.BCPUNS-y.ACPUNS), absI(x.BCPUNS-x.ACPUNS)),
			cmp.Compare(x.Name, y.Name), cmp.Compare(x.Kind, y.Kind))
	})
	if out == nil {
		out = []DiffCompiler{}
	}
	return out
}

func diffGPUs(ra, rb *attribution.Result) []DiffGPU {
	idx := map[int]int{}
	var out []DiffGPU
	get := func(index int, name string) *DiffGPU {
		i, ok := idx[index]
		if !ok {
			i = len(out)
			idx[index] = i
			out = append(out, DiffGPU{Index: index})
		}
		if out[i].Name == "" {
			out[i].Name = name
		}
		return &out[i]
	}
	if row := ra.Row(attribution.GPUCompute); row != nil {
		for _, g := range row.GPUs {
			dg := get(g.Index, g.Name)
			dg.AUtilMeanPct, dg.ABusyNS, dg.AVRAMPeakBytes, dg.ANS = g.Device.UtilMeanPct, g.BusyNS, g.Device.VRAMPeakBytes, g.NS
		}
	}
	if row := rb.Row(attribution.GPUCompute); row != nil {
		for _, g := range row.GPUs {
			dg := get(g.Index, g.Name)
			dg.BUtilMeanPct, dg.BBusyNS, dg.BVRAMPeakBytes, dg.BNS = g.Device.UtilMeanPct, g.BusyNS, g.Device.VRAMPeakBytes, g.NS
		}
	}
	slices.SortStableFunc(out, func(x, y DiffGPU) int { return cmp.Compare(x.Index, y.Index) })
	if out == nil {
		out = []DiffGPU{}
	}
	return out
}

func diffDownloads(ra, rb *attribution.Result) []DiffDownload {
	var rows rowsByKey[DiffDownload]
	get := func(p string) *DiffDownload {
		return rows.get(p, func() DiffDownload { return DiffDownload{Path: p} })
	}
	if row := ra.Row(attribution.Download); row != nil {
		for _, x := range row.Downloads {
			dd := get(x.Path)
			dd.ABytes, dd.ANS = dd.ABytes+x.Bytes, dd.ANS+x.NS
		}
	}
	if row := rb.Row(attribution.Download); row != nil {
		for _, x := range row.Downloads {
			dd := get(x.Path)
			dd.BBytes, dd.BNS = dd.BBytes+x.Bytes, dd.BNS+x.NS
		}
	}
	out := rows.rows
	slices.SortStableFunc(out, func(x, y DiffDownload) int {
		return cmp.Or(cmp.Compare(absI(y.BNS-y.ANS), absI(x.BNS-x.ANS)), cmp.Compare(x.Path, y.Path))
	})
	if out == nil {
		out = []DiffDownload{}
	}
	return out
}

func diffWarnings(a, b *record.Record) []string {
	var out []string
	if a.Host.Hostname != b.Host.Hostname {
		out = append(out, fmt.Sprintf("A and B come from different hosts (%s, %s): disks, page cache and GPUs differ",
			cmp.Or(a.Host.Hostname, "?"), cmp.Or(b.Host.Hostname, "?")))
	} else if a.Host.Kernel != b.Host.Kernel && a.Host.Kernel != "" && b.Host.Kernel != "" {
		out = append(out, fmt.Sprintf("A and B ran on different kernels (%s, %s)", a.Host.Kernel, b.Host.Kernel))
	}
	if ca, cb := strings.Join(a.Command, " "), strings.Join(b.Command, " "); !slices.Equal(a.Command, b.Command) {
		out = append(out, fmt.Sprintf("A and B ran different commands (%q, %q): the difference is not only the caches", ca, cb))
	}
	if a.User.Name != b.User.Name || a.User.Home != b.User.Home {
		out = append(out, fmt.Sprintf("A and B ran as different users (%s, %s): their cache directories differ",
			cmp.Or(a.User.Name, "?"), cmp.Or(b.User.Name, "?")))
	}
	if a.ExitCode != b.ExitCode {
		out = append(out, fmt.Sprintf("A exited %d and B exited %d: one of them may not have done the same work", a.ExitCode, b.ExitCode))
	}
	for _, s := range []struct {
		name string
		r    *record.Record
	}{{"A", a}, {"B", b}} {
		if n := s.r.Lost.Total(); n > 0 {
			out = append(out, fmt.Sprintf("%s lost %d events: its numbers are lower bounds", s.name, n))
		}
		if s.r.Interrupted {
			out = append(out, fmt.Sprintf("%s was interrupted before the command ended", s.name))
		}
	}
	if !a.Start.IsZero() && !b.Start.IsZero() && b.Start.Before(a.Start) {
		out = append(out, "B was recorded before A; put the earlier (cold) run first")
	}
	return out
}

// ---- verdict ----

// verdict says how much faster or slower B was and which categories
// made the difference, with the evidence behind each.
func (d *Diff) verdict() string {
	delta := d.DeltaNS
	aw, bw := d.A.WallNS, d.B.WallNS
	walls := fmt.Sprintf("%s → %s", attribution.FormatDuration(aw), attribution.FormatDuration(bw))
	// Within 2% (or 1ms) the runs took the same time.
	if absI(delta) <= max(max(aw, bw)/50, 1_000_000) {
		return fmt.Sprintf("A and B took about as long (%s).", walls)
	}
	dir := int64(1)
	word := "slower"
	if delta < 0 {
		dir, word = -1, "faster"
	}
	rows := slices.Clone(d.Breakdown)
	slices.SortStableFunc(rows, func(x, y DiffCategory) int { return cmp.Compare(absI(y.DeltaNS), absI(x.DeltaNS)) })
	var with, against []string
	for _, c := range rows {
		if c.DeltaNS == 0 {
			continue
		}
		part := fmt.Sprintf("%s %s %s%s", attribution.FormatDuration(absI(c.DeltaNS)), lessMore(c.DeltaNS), c.Category.Label(), d.detail(c))
		if c.DeltaNS*dir > 0 && absI(c.DeltaNS)*20 >= absI(delta) && len(with) < 3 {
			with = append(with, part)
		} else if c.DeltaNS*dir < 0 && absI(c.DeltaNS)*10 >= absI(delta) && len(against) < 2 {
			against = append(against, part)
		}
	}
	s := fmt.Sprintf("B was %s %s (%s)", attribution.FormatDuration(absI(delta)), word, walls)
	if len(with) > 0 {
		s += ": " + strings.Join(with, ", ")
	}
	if len(against) > 0 {
		s += "; but " + strings.Join(against, ", ")
	}
	return s + "."
}

func lessMore(delta int64) string {
	if delta < 0 {
		return "less"
	}
	return "more"
}

// detail names the evidence behind a category's change, in parentheses.
func (d *Diff) detail(c DiffCategory) string {
	less := c.DeltaNS < 0
	switch c.Category {
	case attribution.DiskRead:
		want := FileUncached
		verb := "not cached"
		if less {
			want, verb = FileCached, "cached"
		}
		var names []string
		for _, f := range d.Files {
			if f.Change == want {
				names = append(names, diffShortPath(f.Path))
			}
		}
		if len(names) > 0 {
			return " (" + diffNames(names) + " " + wasWere(len(names)) + " " + verb + ")"
		}
		var a, b uint64
		for _, f := range d.Files {
			a += f.ABytesFromDisk
			b += f.BBytesFromDisk
		}
		if a != b {
			return fmt.Sprintf(" (%s read from disk instead of %s)", Bytes(b), Bytes(a))
		}
	case attribution.JITCompile:
		var parts []string
		for _, k := range d.Caches {
			switch {
			case less && k.BecameHits > 0:
				parts = append(parts, fmt.Sprintf("%s %s %s", diffCount(k.BecameHits), k.Name, plural(k.BecameHits, "kernel was a cache hit", "kernels were cache hits")))
			case !less && k.BMisses > k.AMisses:
				parts = append(parts, fmt.Sprintf("%s more %s cache %s", diffCount(k.BMisses-k.AMisses), k.Name, plural(k.BMisses-k.AMisses, "miss", "misses")))
			}
		}
		if len(parts) == 0 {
			for _, x := range d.Compilers {
				if x.Kind == "compiler" && x.ARuns != x.BRuns {
					parts = append(parts, fmt.Sprintf("%s ran %s instead of %s", x.Name, times(x.BRuns), times(x.ARuns)))
				}
				if len(parts) == 2 {
					break
				}
			}
		}
		if len(parts) > 0 {
			return " (" + strings.Join(parts, ", ") + ")"
		}
	case attribution.Download:
		var names []string
		for _, x := range d.Downloads {
			if (less && x.ANS > 0 && x.BNS == 0) || (!less && x.BNS > 0 && x.ANS == 0) {
				names = append(names, diffShortPath(x.Path))
			}
		}
		if len(names) > 0 {
			if less {
				return " (" + diffNames(names) + " " + wasWere(len(names)) + " already downloaded)"
			}
			return " (" + diffNames(names) + " " + wasWere(len(names)) + " downloaded)"
		}
	case attribution.GPUCompute:
		if len(d.GPUs) == 1 {
			g := d.GPUs[0]
			return fmt.Sprintf(" (mean utilization %.0f%% → %.0f%%)", g.AUtilMeanPct, g.BUtilMeanPct)
		}
	}
	return ""
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return diffCount(uint64(max(n, 0))) + " times"
}

// diffNames lists up to two names, then a count of the others.
func diffNames(names []string) string {
	switch len(names) {
	case 1:
		return names[0]
	case 2:
		return names[0] + " and " + names[1]
	case 3:
		return names[0] + " and 2 other files"
	}
	return fmt.Sprintf("%s and %d other files", names[0], len(names)-1)
}

// diffShortPath keeps a path whole up to 48 bytes, else as many of its last
// elements as fit after "…/".
func diffShortPath(p string) string {
	const limit = 48
	if len(p) <= limit {
		return p
	}
	parts := strings.Split(strings.TrimRight(p, "/"), "/")
	keep := parts[len(parts)-1]
	for i := len(parts) - 2; i >= 0 && len(parts[i])+1+len(keep) <= limit-2; i-- {
		keep = parts[i] + "/" + keep
	}
	return "…/" + keep
}

// diffCount writes n with thousands separators: 1,180.
func diffCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ---- rendering ----

// WriteDiffJSON writes d as indented JSON.
func WriteDiffJSON(w io.Writer, d *Diff) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// DiffTextOptions shape the text diff.
type DiffTextOptions struct {
	TopFiles int // files listed; 10 when zero
}

// WriteDiffText writes d for people.
func WriteDiffText(w io.Writer, d *Diff, opt DiffTextOptions) error {
	if opt.TopFiles <= 0 {
		opt.TopFiles = 10
	}
	var b strings.Builder
	b.WriteString("coldtrace diff\n")
	for _, s := range []struct {
		name string
		r    DiffRun
	}{{"A", d.A}, {"B", d.B}} {
		state := "warm"
		if s.r.Cold {
			state = "cold start"
		}
		fmt.Fprintf(&b, "  %s: %s — %s wall, exit %d, %s", s.name, cmp.Or(strings.Join(s.r.Command, " "), "?"),
			attribution.FormatDuration(s.r.WallNS), s.r.ExitCode, state)
		if s.r.Host != "" || !s.r.Start.IsZero() {
			var where []string
			if s.r.Host != "" {
				where = append(where, s.r.Host)
			}
			if !s.r.Start.IsZero() {
				where = append(where, s.r.Start.Local().Format("2006-01-02 15:04:05"))
			}
			fmt.Fprintf(&b, " (%s)", strings.Join(where, ", "))
		}
		b.WriteString("\n")
	}

	b.WriteString("\n")
	fmt.Fprintf(&b, "  %-13s %10s %10s %10s\n", "", "A", "B", "B−A")
	for _, c := range d.Breakdown {
		fmt.Fprintf(&b, "  %-13s %10s %10s %10s\n", c.Category.Label(), attribution.FormatDuration(c.ANS),
			attribution.FormatDuration(c.BNS), signedDuration(c.DeltaNS))
	}
	fmt.Fprintf(&b, "  %-13s %10s %10s %10s\n", "wall", attribution.FormatDuration(d.A.WallNS),
		attribution.FormatDuration(d.B.WallNS), signedDuration(d.DeltaNS))
	var tw *tabwriter.Writer

	var files []DiffFile
	for _, f := range d.Files {
		if f.APagesMissed+f.BPagesMissed > 0 || f.ADiskNS+f.BDiskNS > 0 {
			files = append(files, f)
		}
	}
	if len(files) > 0 {
		b.WriteString("\n  files (A → B)\n")
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    path\tpages missed\tfrom disk\tdisk time\t\n")
		for i, f := range files {
			if i == opt.TopFiles {
				fmt.Fprintf(tw, "    … %d more files (see --json)\t\t\t\t\n", len(files)-i)
				break
			}
			fmt.Fprintf(tw, "    %s\t%s → %s\t%s → %s\t%s → %s\t%s\n", diffShortPath(f.Path),
				diffCount(f.APagesMissed), diffCount(f.BPagesMissed), Bytes(f.ABytesFromDisk), Bytes(f.BBytesFromDisk),
				attribution.FormatDuration(f.ADiskNS), attribution.FormatDuration(f.BDiskNS), f.Change)
		}
		tw.Flush()
	}
	if len(d.Caches) > 0 {
		b.WriteString("\n  caches (A → B)\n")
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    cache\tmisses\thits\tentries written\tcompile time\t\n")
		for _, c := range d.Caches {
			note := ""
			if c.BecameHits > 0 {
				note = fmt.Sprintf("%s of A's misses were hits in B", diffCount(c.BecameHits))
			}
			fmt.Fprintf(tw, "    %s\t%s → %s\t%s → %s\t%s → %s\t%s → %s\t%s\n", c.Name,
				diffCount(c.AMisses), diffCount(c.BMisses), diffCount(c.AHits), diffCount(c.BHits),
				diffCount(c.AEntriesWritten), diffCount(c.BEntriesWritten),
				attribution.FormatDuration(c.ACompileNS), attribution.FormatDuration(c.BCompileNS), note)
		}
		tw.Flush()
	}
	if len(d.Compilers) > 0 {
		b.WriteString("\n  compilers (A → B)\n")
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    compiler\truns\tCPU\tcompile time\t\n")
		for _, c := range d.Compilers {
			name := c.Name
			if c.Kind != "compiler" {
				name += " (" + strings.ReplaceAll(c.Kind, "_", "-") + ")"
			}
			fmt.Fprintf(tw, "    %s\t%d → %d\t%s → %s\t%s → %s\t\n", name, c.ARuns, c.BRuns,
				attribution.FormatDuration(c.ACPUNS), attribution.FormatDuration(c.BCPUNS),
				attribution.FormatDuration(c.ANS), attribution.FormatDuration(c.BNS))
		}
		tw.Flush()
	}
	if len(d.GPUs) > 0 {
		b.WriteString("\n  GPUs (A → B)\n")
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    GPU\tmean util\tVRAM peak\tGPU compute\t\n")
		for _, g := range d.GPUs {
			name := fmt.Sprintf("%d", g.Index)
			if g.Name != "" {
				name += " " + g.Name
			}
			fmt.Fprintf(tw, "    %s\t%.0f%% → %.0f%%\t%s → %s\t%s → %s\t\n", name, g.AUtilMeanPct, g.BUtilMeanPct,
				Bytes(g.AVRAMPeakBytes), Bytes(g.BVRAMPeakBytes),
				attribution.FormatDuration(g.ANS), attribution.FormatDuration(g.BNS))
		}
		tw.Flush()
	}
	if len(d.Downloads) > 0 {
		b.WriteString("\n  downloads (A → B)\n")
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, x := range d.Downloads {
			fmt.Fprintf(tw, "    %s\t%s → %s\t%s → %s\t\n", diffShortPath(x.Path), Bytes(x.ABytes), Bytes(x.BBytes),
				attribution.FormatDuration(x.ANS), attribution.FormatDuration(x.BNS))
		}
		tw.Flush()
	}

	fmt.Fprintf(&b, "\n  verdict: %s\n", d.Verdict)
	for _, warn := range d.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func signedDuration(ns int64) string {
	if ns > 0 {
		return "+" + attribution.FormatDuration(ns)
	}
	return attribution.FormatDuration(ns)
}
