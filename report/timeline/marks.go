package timeline

import "github.com/coldtrace/coldtrace/attribution"

// marks adds each mark as a global instant event (a line across every
// track in Perfetto) and each segment as a slice on the phases track's
// process, so a round's span can be selected whole.
func (tb *builder) marks() {
	for _, m := range tb.r.Marks {
		tb.evs = append(tb.evs, &event{Name: m.Label, Cat: "mark", Ph: "i", Scope: "g", TS: micros(max(m.AtNS, 0)),
			PID: RunPID, TID: phasesTID, end: max(m.AtNS, 0)})
	}
	if len(tb.r.Marks) == 0 {
		return
	}
	for _, s := range attribution.Segments(tb.r, attribution.SegmentOptions{}) {
		tb.slice(s.Label, "segment", RunPID, segmentsTID, s.StartNS, s.EndNS, map[string]any{"segment": s.Index})
	}
	tb.addMeta("thread_name", RunPID, segmentsTID, map[string]any{"name": "segments"})
}

// segmentsTID is the track of the segments, beside the phases.
const segmentsTID = 0x7ffe
