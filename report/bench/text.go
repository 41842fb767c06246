// Package bench renders a `coldtrace bench` report: the table of runs and
// the verdict for the terminal, Markdown, and an SVG plot of the runs.
package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/report/format"
)

// short are the category column heads, in attribution.Categories order.
var short = [...]string{"disk", "jit", "gpu", "dl", "cpu", "other"}

// Flags words a run's marks: warm-up, slow mode, outlier, failed, busy
// (interference), cold, expect-miss.
func Flags(rr abtest.RunReport) string {
	var f []string
	if rr.Warmup {
		f = append(f, "warm-up")
	}
	if rr.Cold != nil {
		f = append(f, "cold")
	}
	switch rr.Status {
	case abtest.Slow:
		f = append(f, "SLOW-MODE")
	case abtest.Outlier:
		f = append(f, "OUTLIER")
	case abtest.Failed:
		f = append(f, "FAILED")
	}
	if rr.Interfered {
		f = append(f, "BUSY")
	}
	if rr.ExpectMiss {
		f = append(f, "NO-MATCH")
	}
	return strings.Join(f, " ")
}

// Table writes one row per run.
func Table(w io.Writer, rep *abtest.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	vram := hasVRAM(rep)
	head := "#\tside\twall\t" + strings.Join(short[:], "\t") + "\tsys\tpeak RSS\t"
	if vram {
		head += "VRAM\t"
	}
	fmt.Fprintln(tw, head+"exit\tstdout\tothers' CPU\tflags")
	for _, rr := range rep.Runs {
		fmt.Fprintln(tw, Row(rr, vram))
	}
	return tw.Flush()
}

// hasVRAM says whether any run had GPU memory: the VRAM column is shown
// only then.
func hasVRAM(rep *abtest.Report) bool {
	for _, rr := range rep.Runs {
		if rr.Result != nil && rr.VRAMPeakBytes > 0 {
			return true
		}
	}
	return false
}

// Row is one run's table row, tab-separated; vram adds its VRAM peak.
func Row(rr abtest.RunReport, vram bool) string {
	cells := []string{fmt.Sprint(rr.N), string(rr.Side), format.Duration(rr.WallNS)}
	for _, v := range rr.Split {
		cells = append(cells, format.Duration(v))
	}
	out := rr.StdoutSHA256
	if len(out) > 8 {
		out = out[:8]
	}
	busy := fmt.Sprintf("%.0f%%", 100*rr.Interference.CPUMean)
	if len(rr.Interference.Top) > 0 && rr.Interference.Top[0].CPUs >= 0.05 {
		t := rr.Interference.Top[0]
		busy += fmt.Sprintf(" (%s)", format.ProcessLabel(int32(t.PID), format.Escape(t.Comm)))
	}
	cells = append(cells, format.Duration(rr.SysNS), format.Bytes(rr.PeakRSSBytes))
	if vram {
		cells = append(cells, format.Bytes(rr.VRAMPeakBytes))
	}
	cells = append(cells, fmt.Sprint(rr.ExitCode), out, busy, Flags(rr))
	return strings.Join(cells, "\t")
}

// Summary writes the drift, the bracketed difference and the verdict.
func Summary(w io.Writer, rep *abtest.Report) error {
	s := rep.Summary
	var b strings.Builder
	if s.HasDrift {
		fmt.Fprintf(&b, "drift: first vs last A %+.1f%% (%s); the line through the As %+.1f%% (%s)\n",
			s.FirstLastPct, format.SignedDuration(s.FirstLastNS), s.DriftPct, format.SignedDuration(s.DriftNS))
	} else {
		b.WriteString("drift: unknown (fewer than two counted A runs)\n")
	}
	number := CountedNumbers(rep)
	for _, p := range s.Pairs {
		fmt.Fprintf(&b, "  B run %d vs the A mean around it: %s (%+.1f%%)%s\n", number[p.B], format.SignedDuration(p.DiffNS), p.DiffPct, busyMark(p.Interfered))
	}
	if len(s.Pairs) > 0 {
		fmt.Fprintf(&b, "B − A: median %s (%+.1f%%), range %s … %s over %d pair%s\n",
			format.SignedDuration(s.MedianNS), s.MedianPct, format.SignedDuration(s.MinNS), format.SignedDuration(s.MaxNS),
			len(s.Pairs), format.Plural(uint64(len(s.Pairs)), "", "s"))
	}
	if n := setApart(rep, abtest.Slow); n > 0 {
		fmt.Fprintf(&b, "%d run%s in the slow mode (system time over twice the least of its side) set apart\n", n, format.Plural(uint64(n), "", "s"))
	}
	if n := setApart(rep, abtest.Outlier); n > 0 {
		fmt.Fprintf(&b, "%d outlier run%s set apart\n", n, format.Plural(uint64(n), "", "s"))
	}
	if rep.OutputsDiffer {
		b.WriteString("outputs: the runs' stdout differ\n")
	} else {
		b.WriteString("outputs: identical in every successful run\n")
	}
	fmt.Fprintf(&b, "verdict: %s\n", Verdict(s))
	if rep.Stopped != "" {
		fmt.Fprintf(&b, "stopped: %s\n", rep.Stopped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// CountedNumbers maps the statistics' run indexes (counted runs, from 0)
// to the runs' numbers in the table (every run, from 1).
func CountedNumbers(rep *abtest.Report) []int {
	var out []int
	for _, rr := range rep.Runs {
		if !rr.Warmup {
			out = append(out, rr.N)
		}
	}
	return out
}

func busyMark(b bool) string {
	if b {
		return "  [interference]"
	}
	return ""
}

func setApart(rep *abtest.Report, st abtest.Status) int {
	n := 0
	for _, rr := range rep.Runs {
		if rr.Status == st {
			n++
		}
	}
	return n
}

// Verdict words the judgement: "B is 12.1s faster (±0.4s): 11.3s less
// disk reads, 0.8s less JIT compile".
func Verdict(s abtest.Summary) string {
	v := s.Verdict
	var b strings.Builder
	switch v.Kind {
	case abtest.TooFew:
		if v.Pairs == 0 {
			b.WriteString("too few runs to compare (no B with a counted A beside it)")
			break
		}
		fmt.Fprintf(&b, "too few pairs to tell: B − A median %s (range %s … %s) over %d pair%s",
			format.SignedDuration(s.MedianNS), format.SignedDuration(s.MinNS), format.SignedDuration(s.MaxNS),
			v.Pairs, format.Plural(uint64(v.Pairs), "", "s"))
		ind := v.Independent
		if ind == 0 { // a verdict written before brackets were counted
			ind = v.Pairs
		}
		if ind < v.Pairs {
			fmt.Fprintf(&b, " (%d independent: Bs between the same two As share them)", ind)
		}
		b.WriteString(", all one way")
		if ind > 1 {
			fmt.Fprintf(&b, ", as the same command on both sides gives 1 time in %d", 1<<(ind-1))
		}
		fmt.Fprintf(&b, "; %d independent are needed, or every B beyond every A (raise --pairs)", abtest.MinPairs)
	case abtest.NoDifference:
		fmt.Fprintf(&b, "no difference beyond drift: B − A median %s (range %s … %s)",
			format.SignedDuration(s.MedianNS), format.SignedDuration(s.MinNS), format.SignedDuration(s.MaxNS))
		var why []string
		if v.Straddles {
			why = append(why, "the range includes zero")
		}
		if v.WithinDrift {
			why = append(why, "the median is smaller than the drift of "+format.SignedDuration(s.DriftNS))
		}
		if v.WithinSpread {
			why = append(why, "the B runs lie within the spread of the A runs")
		}
		b.WriteString(": " + strings.Join(why, ", "))
	default:
		word := "faster"
		if v.Kind == abtest.BSlower {
			word = "slower"
		}
		fmt.Fprintf(&b, "B is %s %s (±%s, %+.1f%%)", format.Duration(abs(s.MedianNS)), word,
			format.Duration((s.MaxNS-s.MinNS)/2), s.MedianPct)
		for i, c := range v.Why {
			sep := ", "
			if i == 0 {
				sep = ": "
			}
			more := "more"
			if c.MedianNS < 0 {
				more = "less"
			}
			fmt.Fprintf(&b, "%s%s %s %s", sep, format.Duration(abs(c.MedianNS)), more, c.Category.Label())
		}
	}
	if v.Interference {
		fmt.Fprintf(&b, "; other processes were busy during the runs and may explain it (the pairs without them say: %s)", kindWords(v.CleanKind))
	}
	return b.String()
}

func kindWords(k abtest.Kind) string {
	switch k {
	case abtest.BFaster:
		return "B faster"
	case abtest.BSlower:
		return "B slower"
	case abtest.NoDifference:
		return "no difference beyond drift"
	}
	return "no pair left"
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Markdown writes the runs and the verdict as a Markdown table.
func Markdown(w io.Writer, rep *abtest.Report) error {
	var b strings.Builder
	vram := hasVRAM(rep)
	head, align := "| # | side | wall | "+strings.Join(labels(), " | ")+" | sys | peak RSS | ", "|---|---|---:|"+strings.Repeat("---:|", len(short))+"---:|---:|"
	if vram {
		head, align = head+"VRAM | ", align+"---:|"
	}
	b.WriteString(head + "exit | others' CPU | flags |\n" + align + "---:|---:|---|\n")
	for _, rr := range rep.Runs {
		cells := strings.Split(Row(rr, vram), "\t")
		// Drop the stdout hash column: Markdown readers want the verdict.
		cells = append(cells[:len(cells)-3], cells[len(cells)-2:]...)
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "|", `\|`)
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	b.WriteString("\n")
	var sum strings.Builder
	if err := Summary(&sum, rep); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(sum.String(), "\n"), "\n") {
		fmt.Fprintf(&b, "%s  \n", strings.TrimSpace(line))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func labels() []string {
	var out []string
	for _, c := range attribution.Categories {
		out = append(out, c.Label())
	}
	return out
}
