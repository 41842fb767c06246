package timeline

import (
	"fmt"

	"github.com/coldtrace/coldtrace/attribution"
)

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
		args := map[string]any{"segment": s.Index}
		// Each GPU's busy time and VRAM in the segment, on the slice.
		for _, g := range attribution.SegmentGPUs(tb.r, s.StartNS, s.EndNS) {
			p := fmt.Sprintf("gpu%d_", g.Index)
			args[p+"busy_ns"] = g.BusyNS
			args[p+"vram_start_bytes"] = g.VRAMStartBytes
			args[p+"vram_peak_bytes"] = g.VRAMPeakBytes
			args[p+"vram_end_bytes"] = g.VRAMEndBytes
			args[p+"allocated_bytes"] = g.AllocatedBytes
			if g.LostNS != nil {
				args[p+"lost_ns"] = *g.LostNS
			}
		}
		tb.slice(s.Label, "segment", RunPID, segmentsTID, s.StartNS, s.EndNS, args)
	}
	tb.addMeta("thread_name", RunPID, segmentsTID, map[string]any{"name": "segments"})
}

// segmentsTID is the track of the segments, beside the phases.
const segmentsTID = 0x7ffe
