package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// TextOptions shape the terminal summary.
type TextOptions struct {
	TopFiles int // files listed; 10 when zero
}

// Duration formats a duration the way the summary shows it: 61m12s,
// 8.21s, 340ms.
func Duration(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm%02ds", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d > 0:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return "0s"
}

// Bytes formats a byte count in binary units.
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// WriteText writes the terminal summary of r; res is its attribution
// (computed when nil).
func WriteText(w io.Writer, r *record.Record, res *attribution.Result, opt TextOptions) error {
	if opt.TopFiles <= 0 {
		opt.TopFiles = 10
	}
	if res == nil {
		res = attribution.Analyze(r)
	}
	var b strings.Builder
	status := fmt.Sprintf("exit %d", r.ExitCode)
	if r.Signal != "" {
		status = fmt.Sprintf("killed by %s (exit %d)", r.Signal, r.ExitCode)
	}
	fmt.Fprintf(&b, "coldtrace: %s — %s wall, %s\n", strings.Join(r.Command, " "), Duration(r.WallNS), status)
	if r.StartError != "" {
		fmt.Fprintf(&b, "  could not start the command: %s\n", r.StartError)
	}
	if r.Interrupted {
		b.WriteString("  (interrupted: the numbers cover the run up to the interruption)\n")
	}

	writeBreakdown(&b, r, res)

	writeGPU(&b, r)

	var jit strings.Builder
	if err := WriteJITText(&jit, r); err == nil && jit.Len() > 0 {
		b.WriteString("\n")
		b.WriteString(jit.String())
	}

	var totalIO, totalMiss int64
	var totalDisk uint64
	for _, f := range r.Files {
		totalIO += f.IOWaitNS
		totalMiss += f.MissCPUNS
		totalDisk += f.BytesFromDisk
	}
	fmt.Fprintf(&b, "\n  page cache: %s read from disk, %s blocked on I/O, %s filling the cache (kernel CPU)\n",
		Bytes(totalDisk), Duration(totalIO), Duration(totalMiss))
	files := filesByCost(r.Files)
	if len(files) > 0 {
		fmt.Fprintf(&b, "  %-44s %10s %10s %8s %9s %9s\n", "file", "from disk", "accessed", "hit", "I/O wait", "fill CPU")
		for i, f := range files {
			if i == opt.TopFiles {
				fmt.Fprintf(&b, "  … %d more files (see --json)\n", len(files)-i)
				break
			}
			fmt.Fprintf(&b, "  %-44s %10s %10s %7.1f%% %9s %9s\n", shortPath(f.Path, 44), Bytes(f.BytesFromDisk),
				Bytes(f.PagesAccessed*uint64(max(r.Host.PageSize, 1))), 100*hitRatio(f), Duration(f.IOWaitNS), Duration(f.MissCPUNS))
		}
	}

	if len(r.Processes) > 0 {
		fmt.Fprintf(&b, "\n  %-8s %-16s %9s %9s %9s\n", "pid", "process", "on-CPU", "off-CPU", "I/O wait")
		shown := 0
		for _, p := range r.Processes {
			if shown == 8 {
				fmt.Fprintf(&b, "  … %d more processes\n", len(r.Processes)-shown)
				break
			}
			fmt.Fprintf(&b, "  %-8d %-16s %9s %9s %9s\n", p.PID, p.Comm, Duration(p.CPUNS), Duration(p.OffCPUNS), Duration(p.IOWaitNS))
			shown++
		}
	}
	if lost := r.Lost.Total(); lost > 0 {
		fmt.Fprintf(&b, "\n  WARNING: %d events lost (ring buffer %d, file table %d, thread table %d): numbers are lower bounds\n",
			lost, r.Lost.RingBuffer, r.Lost.FileTable, r.Lost.ThreadTable)
	} else {
		b.WriteString("\n  lost events: 0\n")
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", w)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func shortPath(p string, n int) string {
	if len([]rune(p)) <= n {
		return p
	}
	r := []rune(p)
	return "…" + string(r[len(r)-n+1:])
}

// writeBreakdown writes the ledger: each category's wall time with its
// main evidence, the phases, and the verdict.
func writeBreakdown(b *strings.Builder, r *record.Record, res *attribution.Result) {
	b.WriteString("\n")
	for _, row := range res.Breakdown {
		fmt.Fprintf(b, "  %-12s %9s %4d%%", row.Category.Label(), Duration(row.NS), row.Pct)
		switch row.Category {
		case attribution.DiskRead:
			var disk uint64
			var acc, miss uint64
			for _, f := range r.Files {
				disk += f.BytesFromDisk
				acc += f.PagesAccessed
				miss += f.PagesMissed
			}
			fmt.Fprintf(b, "  %s read from disk", Bytes(disk))
			if acc > 0 {
				fmt.Fprintf(b, ", %.0f%% page-cache misses", 100*min(1, float64(miss)/float64(acc)))
			}
		case attribution.GPUCompute:
			if r.GPU != nil && r.GPU.Unavailable != "" {
				fmt.Fprintf(b, "  %s", r.GPU.Unavailable)
			}
		}
		b.WriteString("\n")
		shown := 0
		for _, f := range row.Files {
			if shown == 3 || f.NS*50 < row.NS {
				break
			}
			fmt.Fprintf(b, "      %-40s %10s %4.0f%% miss %9s\n", shortPath(f.Path, 40), Bytes(f.BytesFromDisk), 100*f.MissRatio, Duration(f.NS))
			shown++
		}
		for i, c := range row.Compilers {
			if i == 3 {
				break
			}
			fmt.Fprintf(b, "      %-40s %10s %9s\n", c.Kind+" "+c.Name, fmt.Sprintf("%d runs", c.Runs), Duration(c.NS))
		}
		for _, g := range row.GPUs {
			fmt.Fprintf(b, "      GPU %d %-34s mean util %.0f%%, VRAM peak %s\n", g.Index, g.Name, g.Device.UtilMeanPct, Bytes(g.Device.VRAMPeakBytes))
		}
	}
	if len(res.Phases) > 1 {
		b.WriteString("\n  phases:")
		for _, ph := range res.Phases {
			fmt.Fprintf(b, "  %s %s–%s", ph.Name, Duration(ph.StartNS), Duration(ph.EndNS))
		}
		b.WriteString("\n")
	}
	if res.Verdict != "" {
		fmt.Fprintf(b, "\n  verdict: %s\n", res.Verdict)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(b, "  note: %s\n", n)
	}
}

// writeGPU writes one line per GPU (utilisation, VRAM before / peak / end,
// the run's share) and the GPU processes that were not part of the run.
func writeGPU(b *strings.Builder, r *record.Record) {
	if r.GPU == nil || r.GPU.Unavailable != "" {
		return
	}
	sums := r.GPU.Summaries()
	if len(sums) == 0 {
		return
	}
	b.WriteString("\nGPUs\n")
	for _, g := range sums {
		share := "run's share unknown"
		if g.RunSharePct != nil {
			share = fmt.Sprintf("run's share %.0f%%", *g.RunSharePct)
		}
		fmt.Fprintf(b, "  GPU %d %s: util mean %.0f%% peak %d%%, busy %s; VRAM %s before, %s peak, %s at the end; %s\n",
			g.Index, g.Name, g.UtilMeanPct, g.UtilPeakPct, Duration(g.BusyNS),
			Bytes(g.VRAMBeforeBytes), Bytes(g.VRAMPeakBytes), Bytes(g.VRAMEndBytes), share)
	}
	for _, x := range r.GPU.Interference {
		fmt.Fprintf(b, "  WARNING: GPU %d was also used by pid %d (%s), not part of this run: peak %s, mean SM util %.0f%%\n",
			x.Device, x.PID, x.Name, Bytes(x.MemPeakBytes), x.SMUtilMeanPct)
	}
}
