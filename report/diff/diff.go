package diff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/words"
)

// Schema names the JSON format of `coldtrace diff --json`.
const Schema = "coldtrace.diff/v1"

// document is the JSON of a diff: the comparison's data with the
// verdicts said in words, under the keys of v1 (the run verdicts and the
// diff's verdict are strings there).
type document struct {
	Schema string `json:"schema"`
	*compare.Diff
	A       run    `json:"a"`
	B       run    `json:"b"`
	Verdict string `json:"verdict"`
	// Machine are the verdict's machine causes as data (the verdict
	// string says them).
	Machine []compare.MachineChange `json:"machine,omitempty"`
}

type run struct {
	compare.Run
	Verdict string `json:"verdict"`
	// Label is the run's verdict label, as the text diff prints it.
	Label string `json:"label"`
}

// WriteJSON writes d as indented JSON.
//
// It fills in the words of d's findings (words.FillDiff).
func WriteJSON(w io.Writer, d *compare.Diff) error {
	words.FillDiff(d)
	doc := document{Schema: Schema, Diff: d, A: run{d.A, words.Verdict(d.A.Verdict), d.A.Verdict.Label},
		B: run{d.B, words.Verdict(d.B.Verdict), d.B.Verdict.Label}, Verdict: words.Comparison(d.Verdict),
		Machine: d.Verdict.Machine}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write diff JSON: %w", err)
	}
	return nil
}

// TextOptions shape the text diff.
type TextOptions struct {
	TopFiles int // files listed; 10 when zero
}

// WriteText writes d for people.
//
// It fills in the words of d's findings (words.FillDiff).
func WriteText(w io.Writer, d *compare.Diff, opt TextOptions) error {
	words.FillDiff(d)
	if opt.TopFiles <= 0 {
		opt.TopFiles = 10
	}
	esc := format.Escape
	var b strings.Builder
	b.WriteString("coldtrace diff\n")
	writeRuns(&b, d)
	writeBreakdown(&b, d)
	writeFiles(&b, d, opt.TopFiles)
	writeCaches(&b, d)
	for _, ch := range d.CacheChanges {
		fmt.Fprintf(&b, "    why: %s\n", esc(ch.Sentence))
	}
	writeLate(&b, d, esc)
	writeCandidates(&b, d, esc)
	writeCompilers(&b, d)
	writeGPUs(&b, d)
	writeDownloads(&b, d)
	writeCallSites(&b, d, opt.TopFiles, esc)

	fmt.Fprintf(&b, "\n  verdict: %s\n", esc(words.Comparison(d.Verdict)))
	for _, warn := range d.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", esc(warn))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}

// writeRuns says what each run was: command, wall time, exit, state, host and start, how it was made cold.
func writeRuns(b *strings.Builder, d *compare.Diff) {
	esc := format.Escape
	for _, s := range []struct {
		name string
		r    compare.Run
	}{{"A", d.A}, {"B", d.B}} {
		state := s.r.Verdict.Label
		if state == "" {
			// A run analysed before verdicts had labels.
			state = map[bool]string{true: "cold", false: "warm"}[s.r.Cold]
		}
		fmt.Fprintf(b, "  %s: %s — %s wall, exit %d, %s", s.name, cmp.Or(format.EscapeAll(s.r.Command), "?"),
			format.Duration(s.r.WallNS), s.r.ExitCode, state)
		if s.r.Host != "" || !s.r.Start.IsZero() {
			var where []string
			if s.r.Host != "" {
				where = append(where, esc(s.r.Host))
			}
			if !s.r.Start.IsZero() {
				where = append(where, s.r.Start.Local().Format("2006-01-02 15:04:05"))
			}
			fmt.Fprintf(b, " (%s)", strings.Join(where, ", "))
		}
		b.WriteString("\n")
		if how := words.MadeCold(s.r.MadeCold); how != "" {
			fmt.Fprintf(b, "     %s\n", esc(how))
		}
	}
}

// writeBreakdown is the six categories and the wall time, A, B and B−A.
func writeBreakdown(b *strings.Builder, d *compare.Diff) {
	b.WriteString("\n")
	fmt.Fprintf(b, "  %-13s %10s %10s %10s\n", "", "A", "B", "B−A")
	for _, c := range d.Breakdown {
		fmt.Fprintf(b, "  %-13s %10s %10s %10s\n", c.Category.Label(), format.Duration(c.ANS),
			format.Duration(c.BNS), format.SignedDuration(c.DeltaNS))
	}
	fmt.Fprintf(b, "  %-13s %10s %10s %10s\n", "wall", format.Duration(d.A.WallNS),
		format.Duration(d.B.WallNS), format.SignedDuration(d.DeltaNS))
}

// writeFiles lists the files either run missed or read from disk, top
// at most.
func writeFiles(b *strings.Builder, d *compare.Diff, top int) {
	esc := format.Escape
	var files []compare.File
	for _, f := range d.Files {
		if f.APagesMissed+f.BPagesMissed > 0 || f.ADiskNS+f.BDiskNS > 0 {
			files = append(files, f)
		}
	}
	if len(files) > 0 {
		b.WriteString("\n  files (A → B)\n")
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    path\tpages missed\tfrom disk\tdisk time\t\n")
		for i, f := range files {
			if i == top {
				fmt.Fprintf(tw, "    … %d more files (see --json)\t\t\t\t\n", len(files)-i)
				break
			}
			fmt.Fprintf(tw, "    %s\t%s → %s\t%s → %s\t%s → %s\t%s\n", esc(format.Path(f.Path, format.PathWidth)),
				format.Count(f.APagesMissed), format.Count(f.BPagesMissed), format.Bytes(f.ABytesFromDisk), format.Bytes(f.BBytesFromDisk),
				format.Duration(f.ADiskNS), format.Duration(f.BDiskNS), f.Change)
		}
		tw.Flush()
	}
}

// writeCaches compares the caches of both runs.
func writeCaches(b *strings.Builder, d *compare.Diff) {
	esc := format.Escape
	if len(d.Caches) > 0 {
		b.WriteString("\n  caches (A → B)\n")
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    cache\tmisses\thits\tentries written\tcompile time\t\n")
		for _, c := range d.Caches {
			note := ""
			if c.BecameHits > 0 {
				note = fmt.Sprintf("%s of A's misses were hits in B", format.Count(c.BecameHits))
			}
			fmt.Fprintf(tw, "    %s\t%s → %s\t%s → %s\t%s → %s\t%s → %s\t%s\n", esc(c.Name),
				format.Count(c.AMisses), format.Count(c.BMisses), format.Count(c.AHits), format.Count(c.BHits),
				format.Count(c.AEntriesWritten), format.Count(c.BEntriesWritten),
				format.Duration(c.ACompileNS), format.Duration(c.BCompileNS), note)
		}
		tw.Flush()
	}
}

// writeCompilers compares the compilers of both runs.
func writeCompilers(b *strings.Builder, d *compare.Diff) {
	esc := format.Escape
	if len(d.Compilers) > 0 {
		b.WriteString("\n  compilers (A → B)\n")
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    compiler\truns\tCPU\tcompile time\t\n")
		for _, c := range d.Compilers {
			name := esc(c.Name)
			if c.Kind != "compiler" {
				name += " (" + strings.ReplaceAll(esc(c.Kind), "_", "-") + ")"
			}
			fmt.Fprintf(tw, "    %s\t%d → %d\t%s → %s\t%s → %s\t\n", name, c.ARuns, c.BRuns,
				format.Duration(c.ACPUNS), format.Duration(c.BCPUNS),
				format.Duration(c.ANS), format.Duration(c.BNS))
		}
		tw.Flush()
	}
}

// writeGPUs compares the GPUs and their VRAM.
func writeGPUs(b *strings.Builder, d *compare.Diff) {
	esc := format.Escape
	if len(d.GPUs) > 0 {
		b.WriteString("\n  GPUs (A → B)\n")
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    GPU\tmean util\tVRAM peak\tGPU compute\t\n")
		for _, g := range d.GPUs {
			name := fmt.Sprintf("%d", g.Index)
			if g.Name != "" {
				name += " " + esc(g.Name)
			}
			fmt.Fprintf(tw, "    %s\t%.0f%% → %.0f%%\t%s → %s\t%s → %s\t\n", name, g.AUtilMeanPct, g.BUtilMeanPct,
				format.Bytes(g.AVRAMPeakBytes), format.Bytes(g.BVRAMPeakBytes),
				format.Duration(g.ANS), format.Duration(g.BNS))
		}
		tw.Flush()
		for _, g := range d.GPUs {
			if line := vramLine(g); line != "" {
				b.WriteString(line)
			}
		}
	}
}

// writeDownloads compares the downloads.
func writeDownloads(b *strings.Builder, d *compare.Diff) {
	esc := format.Escape
	if len(d.Downloads) > 0 {
		b.WriteString("\n  downloads (A → B)\n")
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		for _, x := range d.Downloads {
			fmt.Fprintf(tw, "    %s\t%s → %s\t%s → %s\t\n", esc(format.Path(cmp.Or(x.Name, x.Path), format.PathWidth)),
				format.Bytes(x.ABytes), format.Bytes(x.BBytes), format.Duration(x.ANS), format.Duration(x.BNS))
		}
		tw.Flush()
	}
}

// vramLine says what each side did with GPU g's VRAM: "GPU 0 VRAM: A
// allocated 20.6 GiB (1.2 GiB → 18.3 GiB), B allocated none (18.3 GiB →
// 18.3 GiB)"; "" when neither side has VRAM readings.
func vramLine(g compare.GPU) string {
	if g.AVRAMPeakBytes == 0 && g.BVRAMPeakBytes == 0 {
		return ""
	}
	side := func(alloc, from, to uint64) string {
		what := "none"
		if alloc > 0 {
			what = format.Bytes(alloc)
		}
		return fmt.Sprintf("allocated %s (%s → %s)", what, format.Bytes(from), format.Bytes(to))
	}
	return fmt.Sprintf("    GPU %d VRAM: A %s, B %s\n", g.Index,
		side(g.AAllocatedBytes, g.AVRAMStartBytes, g.AVRAMEndBytes), side(g.BAllocatedBytes, g.BVRAMStartBytes, g.BVRAMEndBytes))
}

// writeLate says, for each run, the compiles after its ready point.
func writeLate(b *strings.Builder, d *compare.Diff, esc func(string) string) {
	for _, l := range []struct {
		run  string
		late *advice.LateCompiles
	}{{"A", d.LateA}, {"B", d.LateB}} {
		if l.late != nil {
			fmt.Fprintf(b, "    compiles after ready in %s: %s\n", l.run, esc(l.late.Sentence))
		}
	}
	for _, l := range []struct {
		run    string
		stalls []advice.DownloadStall
	}{{"A", d.StallsA}, {"B", d.StallsB}} {
		for _, s := range l.stalls {
			fmt.Fprintf(b, "    download stall in %s: %s\n", l.run, esc(s.Sentence))
		}
	}
	writeNetWaits(b, d, esc)
}

// writeNetWaits says, for each run, the caches that did not keep their
// entries, the connections that received nothing while it waited and the
// slow name lookups.
func writeNetWaits(b *strings.Builder, d *compare.Diff, esc func(string) string) {
	for _, l := range []struct {
		run    string
		silent []advice.SilentWait
		dns    []advice.SlowLookup
		broken []advice.BrokenCache
	}{{"A", d.SilentA, d.SlowDNSA, d.BrokenA}, {"B", d.SilentB, d.SlowDNSB, d.BrokenB}} {
		for _, c := range l.broken {
			fmt.Fprintf(b, "    cache not kept in %s: %s\n", l.run, esc(c.Sentence))
		}
		for _, s := range l.silent {
			fmt.Fprintf(b, "    network wait in %s: %s\n", l.run, esc(s.Sentence))
		}
		for _, s := range l.dns {
			fmt.Fprintf(b, "    slow name lookup in %s: %s\n", l.run, esc(s.Sentence))
		}
	}
}

// writeCandidates names the directories A filled and B read back that no
// known cache accounts for.
func writeCandidates(b *strings.Builder, d *compare.Diff, esc func(string) string) {
	if len(d.CacheCandidates) == 0 {
		return
	}
	b.WriteString("\n  caches the registry does not know (A filled, B read back)\n")
	for _, c := range d.CacheCandidates {
		fmt.Fprintf(b, "    %s\n", esc(c.Sentence))
	}
}

// writeCallSites lists the Python call sites whose time changed most,
// per category: "disk reads  load_model (load.py:14)  38.0s → 0ms".
func writeCallSites(b *strings.Builder, d *compare.Diff, top int, esc func(string) string) {
	if len(d.CallSites) == 0 {
		return
	}
	b.WriteString("\n  where in the code (A → B)\n")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	for i, c := range d.CallSites {
		if i == top {
			fmt.Fprintf(tw, "    … %d more call sites (see --json)\t\t\t\n", len(d.CallSites)-i)
			break
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s → %s\t\n", c.Category.Label(), esc(c.Site), format.Duration(c.ANS), format.Duration(c.BNS))
	}
	tw.Flush()
}
