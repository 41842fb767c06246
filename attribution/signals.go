package attribution

import (
	"cmp"
	"path"
	"slices"
	"sort"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

type span struct{ start, end int64 }

func overlap(a, b span) int64 { return max(0, min(a.end, b.end)-max(a.start, b.start)) }

// union merges spans (sorted by start) into disjoint ones.
func union(spans []span) []span {
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, s.end)
			continue
		}
		out = append(out, s)
	}
	return out
}

// ---- compilers ----

// findCompilers maps every process that is a compiler, or descends from
// one, to the name its compile time is filed under: its own comm (so the
// evidence says "cc1", "as", "ld" under a gcc). A compiler asked only
// about itself (`rustc --version`) compiles nothing. JIT windows,
// whatever their kind, count only for their own time span.
func findCompilers(r *record.Record, extra []string) map[int32]string {
	names := append([]string(nil), extra...)
	if r.JIT != nil {
		for _, c := range r.JIT.Compilers {
			names = append(names, c.Name)
		}
	}
	m := registry.NewCompilerNames(names)
	byPID := make(map[int32]*record.Process, len(r.Processes))
	for i := range r.Processes {
		p := &r.Processes[i]
		if _, dup := byPID[p.PID]; !dup {
			byPID[p.PID] = p
		}
	}
	isRoot := func(p *record.Process) bool {
		return (m.Match(p.Comm) || (p.Exe != "" && m.Match(path.Base(p.Exe)))) && !registry.QueriesOnly(p.Args)
	}
	out := map[int32]string{}
	for pid, p := range byPID {
		q, seen := p, map[int32]bool{}
		for q != nil && !seen[q.PID] {
			seen[q.PID] = true
			if isRoot(q) {
				out[pid] = p.Name()
				break
			}
			q = byPID[q.PPID]
		}
	}
	return out
}

// ---- JIT windows ----

type pidWindows struct {
	ws     []record.JITWindow // sorted by start; clipped to [0, wall]
	maxEnd []int64            // maxEnd[i] = max end of ws[:i+1]
	union  []span
}

type jitInfo struct {
	frac   float64 // part of the slice the pid spent in some window
	src    tally[srcKey]
	srcSum float64
}

func buildWindows(r *record.Record, wall int64) map[int32]*pidWindows {
	out := map[int32]*pidWindows{}
	if r.JIT == nil {
		return out
	}
	for _, w := range r.JIT.Windows {
		w.StartNS, w.EndNS = max(w.StartNS, 0), min(w.EndNS, wall)
		if w.EndNS <= w.StartNS {
			continue
		}
		pw := out[w.PID]
		if pw == nil {
			pw = &pidWindows{}
			out[w.PID] = pw
		}
		pw.ws = append(pw.ws, w)
	}
	for _, pw := range out {
		sort.SliceStable(pw.ws, func(i, j int) bool { return pw.ws[i].StartNS < pw.ws[j].StartNS })
		spans := make([]span, len(pw.ws))
		pw.maxEnd = make([]int64, len(pw.ws))
		var m int64
		for i, w := range pw.ws {
			spans[i] = span{w.StartNS, w.EndNS}
			m = max(m, w.EndNS)
			pw.maxEnd[i] = m
		}
		pw.union = union(spans)
	}
	return out
}

func windowSource(w record.JITWindow) srcKey {
	k := srcKey{kind: w.Kind, name: w.Source}
	if k.kind == "" {
		k.kind = "in_process"
	}
	if k.name == "" {
		k.name = k.kind
	}
	return k
}

// jitFor is the share of (start, end] that pid spent inside its JIT
// windows, with the windows' sources weighted by their overlap; cached per
// slice.
func (a *analyzer) jitFor(pid int32, start, end int64) *jitInfo {
	pw := a.windows[pid]
	if pw == nil {
		return nil
	}
	if ji, ok := a.jitSeen[pid]; ok {
		return ji
	}
	sl := span{start, end}
	ji := &jitInfo{}
	var u int64
	first := sort.Search(len(pw.union), func(i int) bool { return pw.union[i].end > start })
	for _, s := range pw.union[first:] {
		if s.start >= end {
			break
		}
		u += overlap(s, sl)
	}
	if u > 0 {
		ji.frac = float64(u) / float64(end-start)
		lo := sort.Search(len(pw.maxEnd), func(i int) bool { return pw.maxEnd[i] > start })
		for i := lo; i < len(pw.ws) && pw.ws[i].StartNS < end; i++ {
			if o := overlap(span{pw.ws[i].StartNS, pw.ws[i].EndNS}, sl); o > 0 {
				ji.src.add(windowSource(pw.ws[i]), float64(o))
			}
		}
		ji.srcSum = ji.src.sum()
	}
	a.jitSeen[pid] = ji
	return ji
}

// ---- GPU ----

type gpuSpan struct {
	span
	util float64 // 0..1
}

type devTimeline struct {
	index  int
	spans  []gpuSpan
	cursor int
}

// buildGPU turns each device's utilisation samples into spans, following
// the record's convention: the first sample of a device is the state
// before the run and covers nothing; each later one covers the time since
// the one before it. A sample without utilisation covers nothing. When the
// record knows the run's share of a device's work (other processes used
// it too), the utilisation is scaled by it.
func buildGPU(g *record.GPU, sums []record.GPUSummary, wall int64) []*devTimeline {
	if g == nil || g.Unavailable != "" || len(g.Samples) == 0 {
		return nil
	}
	share := map[int]float64{}
	for _, s := range sums {
		if s.RunSharePct != nil {
			share[s.Index] = min(max(*s.RunSharePct/100, 0), 1)
		}
	}
	var devs []int
	for _, s := range g.Samples {
		if !slices.Contains(devs, s.Device) {
			devs = append(devs, s.Device)
		}
	}
	sort.Ints(devs)
	var out []*devTimeline
	for _, d := range devs {
		f, ok := share[d]
		if !ok {
			f = 1
		}
		ss := g.DeviceSamples(d)
		dt := &devTimeline{index: d}
		for i := 1; i < len(ss); i++ {
			sp := span{max(ss[i-1].TNS, 0), min(ss[i].TNS, wall)}
			interval := ss[i].TNS - ss[i-1].TNS
			if sp.end <= sp.start || ss[i].UtilCoveredNS(interval) <= 0 {
				continue
			}
			// A coarse sample spreads its polls' busy time evenly over
			// its interval; a part without readings counts as idle.
			util := min(ss[i].UtilPctNS(interval)/float64(interval), 100) / 100
			dt.spans = append(dt.spans, gpuSpan{sp, util * f})
		}
		out = append(out, dt)
	}
	return out
}

// gpuIn is the busy time of the busiest device in (start, end]; each
// device's busy time goes into the slice's GPU evidence. Slices come in
// time order, so each device keeps a cursor.
func (a *analyzer) gpuIn(start, end int64) float64 {
	sl := span{start, end}
	var best float64
	for _, dt := range a.gpus {
		for dt.cursor < len(dt.spans) && dt.spans[dt.cursor].end <= start {
			dt.cursor++
		}
		var busy float64
		for j := dt.cursor; j < len(dt.spans) && dt.spans[j].start < end; j++ {
			busy += float64(overlap(dt.spans[j].span, sl)) * dt.spans[j].util
		}
		a.sGPU.add(dt.index, busy)
		best = max(best, busy)
	}
	return best
}

// ---- downloads ----

type dlSpan struct {
	span
	path string
	kept bool
}

// buildDownloads returns the downloads' spans in start order, the union
// of all of them, and the union of those a warm rerun would not repeat.
func buildDownloads(r *record.Record, wall int64) (ds []dlSpan, all, kept []span) {
	for _, d := range r.Downloads {
		sp := span{max(d.StartNS, 0), min(d.EndNS, wall)}
		if sp.end <= sp.start {
			continue
		}
		fate, _ := FateOf(r, d)
		ds = append(ds, dlSpan{sp, DownloadKey(d), fate.Kept()})
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].start < ds[j].start })
	var ks []span
	spans := make([]span, len(ds))
	for i, d := range ds {
		spans[i] = d.span
		if d.kept {
			ks = append(ks, d.span)
		}
	}
	return ds, union(spans), union(ks)
}

// DownloadKey is what a download's evidence is filed under (its
// DownloadEvidence.Path): its destination, or, for one kept in memory,
// its peer.
func DownloadKey(d record.Download) string {
	if d.Path != "" {
		return d.Path
	}
	return "(in memory, from " + cmp.Or(d.Host, d.Peer, "?") + ")"
}

// covered is the part of (start, end] that the disjoint, sorted spans u
// cover, from *cursor on; slices come in time order, so the cursor only
// moves forward.
func covered(u []span, cursor *int, start, end int64) int64 {
	sl := span{start, end}
	for *cursor < len(u) && u[*cursor].end <= start {
		*cursor++
	}
	var n int64
	for j := *cursor; j < len(u) && u[j].start < end; j++ {
		n += overlap(u[j], sl)
	}
	return n
}

// downloadIn is the wall time in (start, end] during which some download
// was in flight, and the part of it during which one that a warm rerun
// would skip was; each download's own overlap goes into the evidence.
func (a *analyzer) downloadIn(start, end int64) (inFlight, kept float64) {
	u := covered(a.dlUnion, &a.dlCursor, start, end)
	if u > 0 {
		sl := span{start, end}
		for _, d := range a.dls {
			if d.start >= end {
				break
			}
			a.sDL.add(d.path, float64(overlap(d.span, sl)))
		}
	}
	return float64(u), float64(covered(a.dlKept, &a.dlKeptCursor, start, end))
}
