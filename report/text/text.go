package text

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/summary"
	"github.com/coldtrace/coldtrace/report/words"
)

// Options shape the terminal summary.
type Options struct {
	TopFiles int // files listed; 10 when zero
	// Baseline is a record whose sequential reads give each device's
	// rate when this run has none (--baseline).
	Baseline *record.Record
}

// Write writes the terminal summary of r; res is its attribution
// (computed when nil). Every string that came from the traced program is
// escaped (format.Escape).
func Write(w io.Writer, r *record.Record, res *attribution.Result, opt Options) error {
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
	if r.Partial != nil {
		status = "exit status unknown"
	}
	if r.Attached != nil {
		status = "detached"
	}
	fmt.Fprintf(&b, "coldtrace: %s — %s wall, %s\n", format.EscapeAll(r.Command), format.Duration(r.WallNS), status)
	if s := words.Attached(r.Attached); s != "" {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	for _, u := range r.Untraced {
		fmt.Fprintf(&b, "  %s\n", words.Untraced(u))
	}
	if r.StartError != "" {
		fmt.Fprintf(&b, "  could not start the command: %s\n", format.Escape(r.StartError))
	}
	if r.Partial != nil {
		fmt.Fprintf(&b, "  PARTIAL record: written at +%s during the run (%s); the numbers cover the run up to then\n",
			format.Duration(r.Partial.AtNS), format.Escape(r.Partial.Reason))
	}
	if c := r.Coarsened; c != nil {
		fmt.Fprintf(&b, "  timeline coarsened from +%s: each sample there sums %d polls (%d polls in all); totals are exact\n",
			format.Duration(c.FromNS), c.PollsPerSample, c.Polls)
	}
	if r.Interrupted {
		b.WriteString("  (interrupted: the numbers cover the run up to the interruption)\n")
	}
	if s := words.MadeCold(r.MadeCold); s != "" {
		fmt.Fprintf(&b, "  %s\n", format.Escape(s))
	}

	adv := advice.Of(r, opt.Baseline)
	words.Fill(&adv)
	writeBreakdown(&b, r, res)
	writeTraps(&b, adv)

	writeGPU(&b, r)

	if jit := jitSection(r); jit != "" {
		b.WriteString("\n")
		b.WriteString(jit)
	}
	writeWhere(&b, r, res)

	writeDownloads(&b, r)

	var totalIO, totalMiss int64
	var totalDisk uint64
	for _, f := range r.Files {
		totalIO += f.IOWaitNS
		totalMiss += f.MissCPUNS
		totalDisk += f.BytesFromDisk
	}
	fmt.Fprintf(&b, "\n  page cache: %s read from disk, %s blocked on I/O, %s filling the cache (kernel CPU)\n",
		format.Bytes(totalDisk), format.Duration(totalIO), format.Duration(totalMiss))
	files := summary.FilesByCost(r.Files)
	if len(files) > 0 {
		fmt.Fprintf(&b, "  %-44s %10s %10s %8s %9s %9s\n", "file", "from disk", "accessed", "hit", "I/O wait", "fill CPU")
		for i, f := range files {
			if i == opt.TopFiles {
				fmt.Fprintf(&b, "  … %d more files (see --json)\n", len(files)-i)
				break
			}
			fmt.Fprintf(&b, "  %-44s %10s %10s %7.1f%% %9s %9s\n", format.Escape(format.Path(f.Name(), 44)), format.Bytes(f.BytesFromDisk),
				format.Bytes(f.PagesAccessed*uint64(max(r.Host.PageSize, 1))), 100*summary.HitRatio(f), format.Duration(f.IOWaitNS), format.Duration(f.MissCPUNS))
			if f.HostPath != "" {
				fmt.Fprintf(&b, "    (on the host: %s)\n", format.Escape(f.HostPath))
			}
			for _, line := range words.FileMachine(f, r.Host.PageSize) {
				fmt.Fprintf(&b, "      %s\n", format.Escape(line))
			}
		}
	}

	writeAdvice(&b, adv)

	writeProcesses(&b, r)
	writeMachine(&b, r)
	if lost := r.Lost.Total(); lost > 0 {
		fmt.Fprintf(&b, "\n  WARNING: %d events lost (ring buffer %d, file table %d, thread table %d): numbers are lower bounds\n",
			lost, r.Lost.RingBuffer, r.Lost.FileTable, r.Lost.ThreadTable)
	} else {
		b.WriteString("\n  lost events: 0\n")
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", format.Escape(w))
	}
	writeNext(&b, adv)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// writeBreakdown writes the ledger: each category's wall time with its
// main evidence, the phases, and the verdict.
func writeBreakdown(b *strings.Builder, r *record.Record, res *attribution.Result) {
	b.WriteString("\n")
	for _, row := range res.Breakdown {
		fmt.Fprintf(b, "  %-12s %9s %4d%%", row.Category.Label(), format.Duration(row.NS), row.Pct)
		switch row.Category {
		case attribution.DiskRead:
			var disk, direct uint64
			var acc, miss uint64
			for _, f := range r.Files {
				disk += f.BytesFromDisk
				direct += f.DirectBytes
				acc += f.PagesAccessed
				miss += f.PagesMissed
			}
			// Direct reads come from disk too, past the page cache: "0 B
			// read from disk" over 64 MiB of them would be false.
			if direct > 0 {
				fmt.Fprintf(b, "  %s read from disk through the page cache, %s direct", format.Bytes(disk), format.Bytes(direct))
			} else {
				fmt.Fprintf(b, "  %s read from disk", format.Bytes(disk))
			}
			if acc > 0 {
				fmt.Fprintf(b, ", %.0f%% page-cache misses", 100*min(1, float64(miss)/float64(acc)))
			}
		case attribution.GPUCompute:
			if r.GPU != nil && r.GPU.Unavailable != "" {
				fmt.Fprintf(b, "  %s", format.Escape(r.GPU.Unavailable))
			}
		case attribution.Download:
			if len(r.Downloads) > 0 {
				var n uint64
				for _, d := range r.Downloads {
					n += d.Bytes
				}
				fmt.Fprintf(b, "  %s received in %d %s", format.Bytes(n), len(r.Downloads), format.Plural(uint64(len(r.Downloads)), "download", "downloads"))
			}
		}
		b.WriteString("\n")
		shown := 0
		for _, f := range row.Files {
			if shown == 3 || f.NS*50 < row.NS {
				break
			}
			fmt.Fprintf(b, "      %-40s %s %9s\n", format.Escape(format.Path(f.Path, 40)), diskDetail(f), format.Duration(f.NS))
			shown++
		}
		for i, c := range row.Compilers {
			if i == 3 {
				break
			}
			fmt.Fprintf(b, "      %-40s %10s %9s\n", format.Escape(c.Kind+" "+c.Name), fmt.Sprintf("%d runs", c.Runs), format.Duration(c.NS))
		}
		for i, d := range row.Downloads {
			if i == 3 {
				break
			}
			fmt.Fprintf(b, "      %-40s %10s %9s %9s\n", format.Escape(format.Path(d.Name, 40)), format.Bytes(d.Bytes),
				fmt.Sprintf("%.0f MB/s", d.MBPerS), format.Duration(d.NS))
		}
		for _, g := range row.GPUs {
			fmt.Fprintf(b, "      GPU %d %-34s mean util %.0f%%, VRAM peak %s\n", g.Index, format.Escape(g.Name), g.Device.UtilMeanPct, format.Bytes(g.Device.VRAMPeakBytes))
		}
	}
	if len(res.Phases) > 1 {
		b.WriteString("\n  phases:")
		for _, ph := range res.Phases {
			fmt.Fprintf(b, "  %s %s–%s", ph.Name, format.Duration(ph.StartNS), format.Duration(ph.EndNS))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\n  state: %s\n", format.Escape(res.Verdict.Label))
	fmt.Fprintf(b, "  verdict: %s\n", format.Escape(words.Verdict(res.Verdict)))
	for _, n := range res.Notes {
		// The GPU row says already why there is no GPU data.
		if n.Kind == attribution.NoteGPUUnavailable && r.GPU != nil && r.GPU.Unavailable != "" {
			continue
		}
		fmt.Fprintf(b, "  note: %s\n", format.Escape(words.Note(n)))
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
			g.Index, format.Escape(g.Name), g.UtilMeanPct, g.UtilPeakPct, format.Duration(g.BusyNS),
			format.Bytes(g.VRAMBeforeBytes), format.Bytes(g.VRAMPeakBytes), format.Bytes(g.VRAMEndBytes), share)
		if g.LostNS != nil {
			fmt.Fprintf(b, "  GPU %d lost at +%s (%s): its series ends there\n", g.Index, format.Duration(*g.LostNS), format.Escape(g.LostReason))
		}
	}
	for _, v := range attribution.VRAMReleases(r) {
		fmt.Fprintf(b, "  GPU %d: %s\n", v.Index, words.VRAMAtExit(v))
	}
	for _, x := range r.GPU.Interference {
		fmt.Fprintf(b, "  WARNING: GPU %d was also used by pid %d (%s), not part of this run: peak %s, mean SM util %.0f%%\n",
			x.Device, x.PID, format.Escape(x.Name), format.Bytes(x.MemPeakBytes), x.SMUtilMeanPct)
	}
}

// writeDownloads lists every download: where it landed, where from, how
// much, how fast, and whether the next run fetches it again.
func writeDownloads(b *strings.Builder, r *record.Record) {
	if len(r.Downloads) == 0 {
		return
	}
	fmt.Fprintf(b, "\n  downloads\n  %-44s %-22s %10s %9s %9s  %s\n", "destination", "from", "bytes", "rate", "time", "next run")
	for _, d := range r.Downloads {
		dest := words.Destination(d)
		fate, _ := attribution.FateOf(r, d)
		fmt.Fprintf(b, "  %-44s %-22s %10s %9s %9s  %s\n", format.Escape(format.Path(dest, 44)),
			format.Escape(format.Trim(cmp.Or(d.Host, d.Peer), 22)), format.Bytes(d.Bytes), fmt.Sprintf("%.0f MB/s", d.MBPerSecond()),
			format.Duration(d.EndNS-d.StartNS), words.Fate(fate, d.Cache))
		if len(d.Connections) > 1 {
			fmt.Fprintf(b, "      over %d connections\n", len(d.Connections))
		}
		if note := words.DestinationNote(d); note != "" {
			fmt.Fprintf(b, "      %s\n", format.Escape(note))
		}
	}
}

// writeMachine writes what the machine let the run use and what else ran:
// memory at the start and the end, the run's memory cgroups and limits,
// other processes' CPU time and steal time.
func writeMachine(b *strings.Builder, r *record.Record) {
	m := r.Machine
	if m == nil {
		return
	}
	fmt.Fprintf(b, "\n  memory: %s total; available %s at the start, %s at the end; page cache %s → %s\n",
		format.Bytes(m.MemStart.TotalBytes), format.Bytes(m.MemStart.AvailableBytes), format.Bytes(m.MemEnd.AvailableBytes),
		format.Bytes(m.MemStart.CachedBytes), format.Bytes(m.MemEnd.CachedBytes))
	for _, c := range m.Cgroups {
		limit := "no limit"
		if c.LimitBytes > 0 {
			limit = "limit " + format.Bytes(c.LimitBytes)
		}
		if c.HighBytes > 0 {
			limit += ", high " + format.Bytes(c.HighBytes)
		}
		fmt.Fprintf(b, "  memory cgroup (v%d) %s: %s, %d traced processes\n", c.Version, format.Escape(c.Path), limit, len(c.PIDs))
	}
	if m.OthersCount > 0 || m.StealNS > 0 {
		names := make([]string, 0, len(m.Others))
		for _, o := range m.Others {
			names = append(names, fmt.Sprintf("%s %s", format.Escape(o.Comm), format.Duration(o.CPUNS)))
		}
		fmt.Fprintf(b, "  other processes: %d used %s of CPU during the run (%s); steal %s\n",
			m.OthersCount, format.Duration(m.OthersCPUNS), strings.Join(names, ", "), format.Duration(m.StealNS))
	}
}

// writeProcesses writes the per-process table: each process's wall (its
// lifetime in the run) beside its thread times, which sum its threads
// and so can exceed the wall (12 threads waiting 4 s are 48 s off-CPU).
func writeProcesses(b *strings.Builder, r *record.Record) {
	if len(r.Processes) == 0 {
		return
	}
	threads := map[int32]int{}
	for _, t := range r.Threads {
		threads[t.PID]++
	}
	fmt.Fprintf(b, "\n  %-8s %-16s %9s %8s %9s %9s %9s %9s\n", "pid", "process", "wall", "threads", "on-CPU", "off-CPU", "I/O wait", "run queue")
	for i, p := range r.Processes {
		if i == 8 {
			fmt.Fprintf(b, "  … %d more processes\n", len(r.Processes)-i)
			break
		}
		end := p.EndNS
		if end == 0 {
			end = r.WallNS
		}
		fmt.Fprintf(b, "  %-8d %-16s %9s %8d %9s %9s %9s %9s\n", p.PID, format.Escape(p.Name()), format.Duration(max(end-max(p.StartNS, 0), 0)),
			max(threads[p.PID], 1), format.Duration(p.CPUNS), format.Duration(p.OffCPUNS), format.Duration(p.IOWaitNS), format.Duration(p.RunQueueNS))
	}
	b.WriteString("  (on-CPU, off-CPU, I/O wait and run queue sum the process's threads; wall is its lifetime in the run)\n")
}

// diskDetail is a disk_read evidence line's middle: bytes from disk and
// the miss ratio, or what a rerun pays again (direct I/O, I/O outside the
// page cache).
func diskDetail(f attribution.FileEvidence) string {
	switch {
	case f.ID == attribution.OutsidePageCacheID:
		return fmt.Sprintf("%16s", "a rerun waits again")
	case f.ID < 0:
		return fmt.Sprintf("%16s", "")
	case f.DirectBytes > 0 && f.PagesMissed == 0:
		return fmt.Sprintf("%10s direct", format.Bytes(f.DirectBytes))
	}
	return fmt.Sprintf("%10s %4.0f%% miss", format.Bytes(f.BytesFromDisk), 100*f.MissRatio)
}
