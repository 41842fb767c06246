package segments

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/words"
)

// writeGPUText writes, per GPU, a table of the segments' busy time and
// VRAM, the sentence that says which segments allocated VRAM, and
// whether the run's VRAM was released at exit. Nothing without GPU data.
func writeGPUText(b *strings.Builder, segs []attribution.SegmentResult) error {
	if len(segs) == 0 || len(segs[0].GPUs) == 0 {
		return nil
	}
	for gi := range segs[0].GPUs {
		idx := segs[0].GPUs[gi].Index
		fmt.Fprintf(b, "\n  GPU %d per segment:\n", idx)
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  #\tlabel\tGPU busy\tVRAM start\tpeak\tend\tallocated\t\n")
		for _, s := range segs {
			if gi >= len(s.GPUs) {
				continue
			}
			g := s.GPUs[gi]
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Index, format.Trim(format.Escape(s.Label), 24),
				format.Duration(g.BusyNS), format.Bytes(g.VRAMStartBytes), format.Bytes(g.VRAMPeakBytes),
				format.Bytes(g.VRAMEndBytes), format.Bytes(g.AllocatedBytes))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if line := AllocationSentence(segs, gi); line != "" {
			fmt.Fprintf(b, "  GPU %d: %s\n", idx, line)
		}
		for _, s := range segs {
			if gi < len(s.GPUs) && s.GPUs[gi].LostNS != nil {
				fmt.Fprintf(b, "  GPU %d: lost at +%s (in %s): its numbers stop there\n", idx,
					format.Duration(s.StartNS+*s.GPUs[gi].LostNS), format.Escape(s.Label))
			}
		}
		last := segs[len(segs)-1]
		for _, v := range last.VRAMAtExit {
			if v.Index == idx {
				fmt.Fprintf(b, "  GPU %d: %s\n", idx, words.VRAMAtExit(v))
			}
		}
	}
	return nil
}

// AllocationSentence says which segments allocated VRAM on the gi-th GPU:
// "round 1 allocated 20.6 GiB of VRAM (peak 21.8 GiB) and kept 18.3 GiB;
// rounds 2–10 allocated none". The time before the first mark is left
// out when it allocated nothing.
func AllocationSentence(segs []attribution.SegmentResult, gi int) string {
	var parts []string
	var none []attribution.SegmentResult
	flush := func() {
		if len(none) > 0 {
			parts = append(parts, labelRange(none)+" allocated none")
			none = nil
		}
	}
	for _, s := range segs {
		if gi >= len(s.GPUs) || s.GPUs[gi].Polls == 0 {
			continue
		}
		g := s.GPUs[gi]
		if g.AllocatedBytes == 0 {
			if s.Index != 0 {
				none = append(none, s)
			}
			continue
		}
		flush()
		parts = append(parts, fmt.Sprintf("%s allocated %s of VRAM (peak %s) and kept %s", format.Escape(s.Label),
			format.Bytes(g.AllocatedBytes), format.Bytes(g.VRAMPeakBytes), format.Bytes(g.VRAMEndBytes)))
	}
	flush()
	if len(parts) == 1 && strings.HasSuffix(parts[0], " allocated none") {
		return "" // an idle GPU: its table says enough
	}
	return strings.Join(parts, "; ")
}

// labelRange names consecutive segments: "round 4" alone, "rounds 2–10"
// when their labels are one word and consecutive numbers, else
// "segments 2–10" (or the two labels).
func labelRange(segs []attribution.SegmentResult) string {
	first, last := segs[0], segs[len(segs)-1]
	if len(segs) == 1 {
		return format.Escape(first.Label)
	}
	prefix, n0, ok := splitNumber(first.Label)
	for i, s := range segs {
		p, n, k := splitNumber(s.Label)
		ok = ok && k && p == prefix && n == n0+i
	}
	if ok {
		return fmt.Sprintf("%ss %d–%d", format.Escape(prefix), n0, n0+len(segs)-1)
	}
	if len(segs) == 2 {
		return format.Escape(first.Label) + " and " + format.Escape(last.Label)
	}
	return fmt.Sprintf("segments %d–%d", first.Index, last.Index)
}

// splitNumber splits "round 12" into "round" and 12.
func splitNumber(label string) (string, int, bool) {
	p, num, ok := strings.Cut(label, " ")
	if !ok || p == "" || strings.Contains(num, " ") {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	return p, n, err == nil
}
