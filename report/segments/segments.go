// Package segments renders a run cut into segments (marks, idle cuts):
// one table row per segment, and the JSON segments[] array.
package segments

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"text/tabwriter"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/words"
)

// JSON is one segment in the JSON summary's segments[].
type JSON struct {
	Index     int               `json:"index"`
	Label     string            `json:"label"`
	StartNS   int64             `json:"start_ns"`
	EndNS     int64             `json:"end_ns"`
	Breakdown []attribution.Row `json:"breakdown"`
	TopCause  string            `json:"top_cause"`
	// GPUs: the segment's GPU busy time and VRAM per device (absent
	// without GPU data); VRAMAtExit, on the last segment, whether the
	// run's VRAM was released when the command exited.
	GPUs       []attribution.SegmentGPU  `json:"gpus,omitempty"`
	VRAMAtExit []attribution.VRAMRelease `json:"vram_at_exit,omitempty"`
}

// ToJSON converts the segments' results.
func ToJSON(segs []attribution.SegmentResult) []JSON {
	out := make([]JSON, 0, len(segs))
	for _, s := range segs {
		out = append(out, JSON{Index: s.Index, Label: s.Label, StartNS: s.StartNS, EndNS: s.EndNS,
			Breakdown: s.Result.Breakdown, TopCause: TopCause(s.Result), GPUs: s.GPUs, VRAMAtExit: s.VRAMAtExit})
	}
	return out
}

// Schema names the JSON of `report --segments --json`.
const Schema = "coldtrace.segments/v1"

// document is the JSON of `report --segments --json`.
type document struct {
	Schema string `json:"schema"`
	// Verdict is the one-line answer: how many segments, and the longest
	// one's wall time and top cause.
	Verdict  string `json:"verdict"`
	Segments []JSON `json:"segments"`
}

// WriteJSON writes {"schema": Schema, "verdict": …, "segments": [...]}.
func WriteJSON(w io.Writer, segs []attribution.SegmentResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(document{Schema: Schema, Verdict: Verdict(segs), Segments: ToJSON(segs)})
}

// Verdict says how many segments there are and which took longest, with
// its top cause: "3 segments; the longest, 2 \"request 1\", took 2.1s:
// disk reads: model.bin".
func Verdict(segs []attribution.SegmentResult) string {
	if len(segs) == 0 {
		return "no segments"
	}
	longest := segs[0]
	for _, s := range segs[1:] {
		if s.EndNS-s.StartNS > longest.EndNS-longest.StartNS {
			longest = s
		}
	}
	return fmt.Sprintf("%s; the longest, %d %q, took %s: %s", format.Counted(uint64(len(segs)), "segment", "segments"),
		longest.Index, format.Escape(longest.Label), format.Duration(longest.EndNS-longest.StartNS), TopCause(longest.Result))
}

// Attached says how an attached record began, or "" for a run.
func Attached(r *record.Record) string { return words.Attached(r.Attached) }

// TopCause names the heaviest avoidable row's main evidence ("disk reads:
// model.safetensors"), else the heaviest row.
func TopCause(res *attribution.Result) string {
	var best *attribution.Row
	for i := range res.Breakdown {
		row := &res.Breakdown[i]
		if row.NS <= 0 || !row.Category.Avoidable() {
			continue
		}
		if best == nil || row.NS > best.NS {
			best = row
		}
	}
	if best == nil {
		for i := range res.Breakdown {
			row := &res.Breakdown[i]
			if row.NS > 0 && (best == nil || row.NS > best.NS) {
				best = row
			}
		}
	}
	if best == nil {
		return "-"
	}
	what := ""
	switch {
	case len(best.Files) > 0 && best.Files[0].Path != "":
		what = path.Base(best.Files[0].Path)
	case len(best.Caches) > 0:
		what = best.Caches[0].Name + " cache"
	case len(best.Compilers) > 0:
		what = best.Compilers[0].Name
	case len(best.Downloads) > 0:
		what = best.Downloads[0].Host
	case len(best.Processes) > 0:
		what = format.ProcessLabel(best.Processes[0].PID, best.Processes[0].Comm)
	}
	if what == "" {
		return best.Category.Label()
	}
	return best.Category.Label() + ": " + format.Escape(what)
}

// WriteText writes the table: one row per segment with its start, wall
// time, the six categories and its top cause. (The text summary says how
// an attached trace began; report --segments prints Attached first.)
func WriteText(w io.Writer, segs []attribution.SegmentResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "  segments (%d):\n", len(segs))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"#", "label", "start", "wall"}
	for _, c := range attribution.Categories {
		head = append(head, c.Label())
	}
	fmt.Fprintf(tw, "  %s\ttop cause\t\n", strings.Join(head, "\t"))
	for _, s := range segs {
		cells := []string{fmt.Sprint(s.Index), format.Trim(format.Escape(s.Label), 24),
			"+" + format.Duration(s.StartNS), format.Duration(s.EndNS - s.StartNS)}
		for _, c := range attribution.Categories {
			ns := int64(0)
			if row := s.Result.Row(c); row != nil {
				ns = row.NS
			}
			cells = append(cells, format.Duration(ns))
		}
		fmt.Fprintf(tw, "  %s\t%s\t\n", strings.Join(cells, "\t"), TopCause(s.Result))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeGPUText(&b, segs); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
