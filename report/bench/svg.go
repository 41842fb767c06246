package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/report/format"
)

// categoryColour fills each category's part of a bar.
var categoryColour = [...]string{"#d62728", "#9467bd", "#2ca02c", "#17becf", "#7f7f7f", "#dddddd"}

// sideColour outlines a bar and marks it under the axis.
var sideColour = map[abtest.Side]string{abtest.A: "#1f4e9c", abtest.B: "#e67e00"}

// SVG draws one bar per run, in run order, its height the wall time and
// stacked by category; A and B have their own outline and mark; the A
// runs' tops are joined by a dashed line, so drift shows as its slope;
// warm-ups are faded and runs set apart are hatched out.
func SVG(w io.Writer, rep *abtest.Report) error {
	const (
		left, right, top, bottom = 70, 20, 40, 70
		barW, gap, plotH         = 28, 12, 260
	)
	n := len(rep.Runs)
	width := left + right + max(n, 1)*(barW+gap)
	width = max(width, 6*110+left+right)
	height := top + plotH + bottom + 16
	var maxWall int64 = 1
	for _, rr := range rep.Runs {
		maxWall = max(maxWall, rr.WallNS)
	}
	y := func(ns int64) float64 { return float64(top+plotH) - float64(plotH)*float64(ns)/float64(maxWall) }

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="13">coldtrace bench: %d runs, drift %s</text>`+"\n", left, n, xmlText(driftWords(rep)))
	fmt.Fprintf(&b, `<text x="%d" y="31"><title>%s</title>%s</text>`+"\n", left, xmlText(Verdict(rep.Summary)),
		xmlText(format.Trim(Verdict(rep.Summary), (width-left)/6)))
	// Axis with three ticks.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left-4, top+plotH, width-right, top+plotH)
	for _, f := range []float64{0, 0.5, 1} {
		ns := int64(f * float64(maxWall))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y(ns)+4, xmlText(format.Duration(ns)))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eeeeee"/>`+"\n", left, y(ns), width-right, y(ns))
	}
	var drift []string
	for i, rr := range rep.Runs {
		x := left + i*(barW+gap) + gap/2
		opacity := "1"
		if rr.Warmup {
			opacity = "0.35"
		}
		fmt.Fprintf(&b, `<g class="run" data-n="%d" data-side="%s" opacity="%s">`, rr.N, rr.Side, opacity)
		fmt.Fprintf(&b, `<title>%s</title>`, xmlText(runTitle(rr)))
		base := int64(0)
		for c, v := range rr.Split {
			if v <= 0 {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>`, x, y(base+v), barW, y(base)-y(base+v), categoryColour[c])
			base += v
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="none" stroke="%s" stroke-width="2"/>`,
			x, y(rr.WallNS), barW, y(0)-y(rr.WallNS), sideColour[rr.Side])
		if rr.Status != "" && rr.Status != abtest.Counted || rr.Interfered {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-width="1.5"/>`, x, y(rr.WallNS), x+barW, y(0))
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="6" fill="%s"/>`, x, top+plotH+4, barW, sideColour[rr.Side])
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s%d</text>`, x+barW/2, top+plotH+24, rr.Side, rr.N)
		b.WriteString("</g>\n")
		if rr.Side == abtest.A && !rr.Warmup && rr.Status == abtest.Counted {
			drift = append(drift, fmt.Sprintf("%d,%.1f", x+barW/2, y(rr.WallNS)))
		}
	}
	if len(drift) > 1 {
		fmt.Fprintf(&b, `<polyline class="drift" points="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="5,3"/>`+"\n",
			strings.Join(drift, " "), sideColour[abtest.A])
	}
	// Legend: categories, then the sides.
	ly := top + plotH + 44
	for c, cat := range attribution.Categories {
		lx := left + c*110
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			lx, ly, categoryColour[c], lx+14, ly+9, xmlText(cat.Label()))
	}
	ly += 16
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">A: %s</text>`+"\n", left, ly+9, sideColour[abtest.A], xmlText(strings.Join(rep.Plan.A.Argv, " ")))
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">B: %s</text>`+"\n", left, ly+25, sideColour[abtest.B], xmlText(strings.Join(rep.Plan.B.Argv, " ")))
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555555">dashed line: the A runs (its slope is the drift); struck out: set apart (slow mode, outlier, failed) or busy; faded: warm-up</text>`+"\n", left, ly+41)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func driftWords(rep *abtest.Report) string {
	if !rep.Summary.HasDrift {
		return "unknown"
	}
	return fmt.Sprintf("%+.1f%% first vs last A, %+.1f%% along the As", rep.Summary.FirstLastPct, rep.Summary.DriftPct)
}

func runTitle(rr abtest.RunReport) string {
	t := fmt.Sprintf("run %d (%s): %s", rr.N, rr.Side, format.Duration(rr.WallNS))
	for c, v := range rr.Split {
		if v > 0 {
			t += fmt.Sprintf(", %s %s", attribution.Categories[c].Label(), format.Duration(v))
		}
	}
	if f := Flags(rr); f != "" {
		t += " [" + f + "]"
	}
	return t
}

// xmlText escapes s for XML character data and attribute values, and
// drops what XML 1.0 cannot carry at all.
func xmlText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r != 0xFFFE && r != 0xFFFF:
			b.WriteRune(r)
		}
	}
	return b.String()
}
