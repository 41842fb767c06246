package attribution

import (
	"fmt"
	"slices"
	"strings"
)

// verdict words the result in one or two sentences and says whether the
// run was a cold start: the avoidable categories (disk_read, jit_compile,
// download) reach coldShare of the wall time.
func verdict(res *Result, coldShare float64) (string, bool) {
	if res.WallNS <= 0 {
		return "empty run: the command exited at once; there is no time to attribute.", false
	}
	var avoid int64
	var cold, warm []*Row
	for i := range res.Breakdown {
		row := &res.Breakdown[i]
		if row.Category.Avoidable() {
			avoid += row.NS
			cold = append(cold, row)
		} else {
			warm = append(warm, row)
		}
	}
	byNS := func(x, y *Row) int { return int(sign(y.NS - x.NS)) }
	slices.SortStableFunc(cold, byNS)
	slices.SortStableFunc(warm, byNS)

	if share(avoid, res.WallNS) >= coldShare {
		var parts []string
		for i, row := range cold {
			if row.NS == 0 || (i > 0 && row.Pct == 0) {
				continue
			}
			parts = append(parts, pct(row)+" "+row.Category.Label()+detail(row))
		}
		return fmt.Sprintf("cold start: %s; a warm rerun should take ~%s.",
			strings.Join(parts, ", "), FormatDuration(res.WarmEstimateNS)), true
	}

	parts := []string{pct(warm[0]) + " " + warm[0].Category.Label() + waitHint(warm[0])}
	if len(warm) > 1 && warm[1].Pct >= 10 {
		parts = append(parts, pct(warm[1])+" "+warm[1].Category.Label()+waitHint(warm[1]))
	}
	var tail string
	if avoid == 0 {
		tail = "nothing came from disk, a compiler or the network, so a rerun should take about as long."
	} else {
		// Name the main avoidable cost even when it is small: "why was
		// it not slower/faster" still wants the file or compiler.
		var mostly string
		if cold[0].NS > 0 {
			mostly = ", mostly " + cold[0].Category.Label() + detail(cold[0])
		}
		tail = fmt.Sprintf("disk reads, compiles and downloads took only %s (%s)%s, so a warm rerun would save little.",
			pctOf(avoid, res.WallNS), FormatDuration(avoid), mostly)
	}
	return "warm run: " + strings.Join(parts, ", ") + "; " + tail, false
}

func sign(v int64) int64 {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func pct(row *Row) string {
	if row.Pct == 0 && row.NS > 0 {
		return "<1%"
	}
	return fmt.Sprintf("%d%%", row.Pct)
}

func pctOf(part, whole int64) string {
	p := share(part, whole) * 100
	if p > 0 && p < 1 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", p)
}

func waitHint(row *Row) string {
	if row.Category == OtherWait {
		return " (sleep, locks, idle)"
	}
	return ""
}

// detail names the top evidence of an avoidable row, in parentheses.
func detail(row *Row) string {
	switch row.Category {
	case DiskRead:
		var top string
		others, unknown := 0, false
		for _, f := range row.Files {
			if f.NS == 0 || f.ID < 0 {
				unknown = unknown || f.NS > 0
				continue
			}
			if top == "" {
				top = shortPath(f.Path)
			} else {
				others++
			}
		}
		switch {
		case top == "" && unknown:
			return " (files not identified)"
		case top == "":
			return ""
		case others == 0:
			return " (" + top + " not in page cache)"
		case others == 1:
			return " (" + top + " and 1 other file not in page cache)"
		}
		return fmt.Sprintf(" (%s and %d other files not in page cache)", top, others)
	case JITCompile:
		var names []string
		for _, c := range row.Compilers {
			if c.NS > 0 && len(names) < 2 {
				names = append(names, c.Name)
			}
		}
		if len(names) == 0 {
			return ""
		}
		return " (" + strings.Join(names, ", ") + ")"
	case Download:
		for _, d := range row.Downloads {
			if d.NS > 0 {
				return " (" + shortPath(d.Path) + ")"
			}
		}
	}
	return ""
}

// shortPath keeps a path whole up to 48 bytes, else as many of its last
// elements as fit (at least one) after "…/".
func shortPath(p string) string {
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

func (a *analyzer) notes(res *Result) []string {
	r := a.r
	var out []string
	if r.StartError != "" {
		out = append(out, "the command could not be started: "+r.StartError)
	}
	if r.Interrupted {
		out = append(out, "coldtrace was interrupted before the command ended; the breakdown covers the part that ran")
	}
	if r.Signal != "" {
		out = append(out, fmt.Sprintf("the command was killed by %s (exit %d)", r.Signal, r.ExitCode))
	}
	if l := r.Lost; l.Total() > 0 {
		out = append(out, fmt.Sprintf("%d events were lost (ring buffer %d, file table %d, thread table %d, tracked table %d, paths %d, fill ends %d): the numbers are lower bounds",
			l.Total(), l.RingBuffer, l.FileTable, l.ThreadTable, l.Tracked, l.Paths, l.FillEnds))
	}
	switch {
	case res.UnobservedNS > 0 && res.UnobservedNS == res.WallNS:
		out = append(out, "no thread samples cover the run: its time counts as other wait unless a GPU or download signal covers it")
	case res.UnobservedNS > 0:
		out = append(out, fmt.Sprintf("the last %s after the final sample were not observed and count as other wait", FormatDuration(res.UnobservedNS)))
	}
	if res.AfterExitNS > 0 {
		out = append(out, fmt.Sprintf("processes kept running after the command exited: %s of thread time after the exit is not in the breakdown", FormatDuration(res.AfterExitNS)))
	}
	if r.GPU != nil && r.GPU.Unavailable != "" {
		out = append(out, "GPU: "+r.GPU.Unavailable)
	}
	for _, s := range a.gpuSums {
		others := r.GPU.InterferenceOn(s.Index)
		if len(others) == 0 {
			continue
		}
		var names []string
		for _, x := range others {
			n := x.Name
			if n == "" {
				n = fmt.Sprintf("pid %d", x.PID)
			}
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		msg := fmt.Sprintf("GPU %d was also used by %d untraced process(es) (%s): ", s.Index, len(others), strings.Join(names, ", "))
		if s.RunSharePct != nil {
			msg += fmt.Sprintf("gpu_compute counts the run's share of its work (%.0f%%)", *s.RunSharePct)
		} else {
			msg += "the run's share is unknown, so gpu_compute may include their work"
		}
		out = append(out, msg)
	}
	return out
}
