package advice

import (
	"slices"
	"strconv"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// LateCompiles are the compiles that started after the program said it
// was ready: each one delayed a request instead of start-up.
type LateCompiles struct {
	// ReadyNS is the ready point (ns since the start), ReadyBy what set
	// it.
	ReadyNS int64  `json:"ready_ns"`
	ReadyBy string `json:"ready_by"`
	// Compiles counts them; CompileNS is the wall time they covered
	// (their union), the latency they added.
	Compiles  int   `json:"compiles"`
	CompileNS int64 `json:"compile_ns"`
	// Segments are the segments they fell in, in time order.
	Segments []LateSegment `json:"segments"`
	// Sentence is filled in by report/words.
	Sentence string  `json:"sentence"`
	Action   *Action `json:"-"`
}

// LateSegment is the compiles of one segment after ready.
type LateSegment struct {
	Index     int    `json:"index"`
	Label     string `json:"label"`
	Compiles  int    `json:"compiles"`
	CompileNS int64  `json:"compile_ns"`
	// Sources name what compiled: compiler programs, caches filled,
	// probed compile entry points.
	Sources []string `json:"sources"`
}

// ReadyPoint is when r's program was ready: the record's own ready
// point, else its first mark after the start (records made before the
// ready point was stored; an idle-split record's first cut is at 0 and
// stands for no mark). ok is false when the record has neither.
func ReadyPoint(r *record.Record) (record.Ready, bool) {
	if r.Ready != nil {
		return *r.Ready, true
	}
	var first *record.Mark
	for i, m := range r.Marks {
		if m.AtNS > 0 && (first == nil || m.AtNS < first.AtNS) {
			first = &r.Marks[i]
		}
	}
	if first == nil {
		return record.Ready{}, false
	}
	return record.Ready{AtNS: first.AtNS, By: "mark " + strconv.Quote(first.Label)}, true
}

func sign(v int64) int64 {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// AfterReady finds the compiles that started after r's ready point:
// compiler subprocesses, caches filled in-process (a miss with an entry
// written) and probed compile calls, each counted once (a window inside
// a cache fill is part of that fill). Nil when there is no ready point
// or no compile after it.
func AfterReady(r *record.Record) *LateCompiles {
	ready, ok := ReadyPoint(r)
	if !ok || r.JIT == nil {
		return nil
	}
	late := lateWindows(r.JIT.Windows, ready.AtNS)
	if len(late) == 0 {
		return nil
	}
	out := &LateCompiles{ReadyNS: ready.AtNS, ReadyBy: ready.By, Compiles: len(late), CompileNS: unionNS(late)}
	for _, seg := range attribution.Segments(r, attribution.SegmentOptions{}) {
		var in []record.JITWindow
		for _, w := range late {
			if w.StartNS >= seg.StartNS && (w.StartNS < seg.EndNS || seg.EndNS == r.WallNS) {
				in = append(in, w)
			}
		}
		if len(in) == 0 {
			continue
		}
		ls := LateSegment{Index: seg.Index, Label: seg.Label, Compiles: len(in), CompileNS: unionNS(in)}
		for _, w := range in {
			if !slices.Contains(ls.Sources, w.Source) {
				ls.Sources = append(ls.Sources, w.Source)
			}
		}
		out.Segments = append(out.Segments, ls)
	}
	if out.CompileNS > 0 {
		out.Action = &Action{SavesNS: out.CompileNS, Finding: *out}
	}
	return out
}

// lateWindows are the compile windows starting at or after ready, each
// compile once: a window inside an in-process cache fill is that fill's
// work.
func lateWindows(ws []record.JITWindow, ready int64) []record.JITWindow {
	var fills, late []record.JITWindow
	for _, w := range ws {
		if w.StartNS >= ready && w.Kind == "in_process" {
			fills = append(fills, w)
		}
	}
	for _, w := range ws {
		if w.StartNS < ready {
			continue
		}
		if w.Kind != "in_process" && slices.ContainsFunc(fills, func(f record.JITWindow) bool {
			return f.StartNS <= w.StartNS && w.EndNS <= f.EndNS
		}) {
			continue
		}
		late = append(late, w)
	}
	slices.SortStableFunc(late, func(a, b record.JITWindow) int { return int(sign(a.StartNS - b.StartNS)) })
	return late
}

// unionNS is the wall time the windows cover together.
func unionNS(ws []record.JITWindow) int64 {
	s := slices.Clone(ws)
	slices.SortFunc(s, func(a, b record.JITWindow) int { return int(sign(a.StartNS - b.StartNS)) })
	var total, end int64
	started := false
	for _, w := range s {
		e := max(w.EndNS, w.StartNS)
		switch {
		case !started || w.StartNS >= end:
			total += e - w.StartNS
			end, started = e, true
		case e > end:
			total += e - end
			end = e
		}
	}
	return total
}
