// Package merge renders `coldtrace merge`: the merged answer of a job's
// ranks (attribution/merge) as text for people or JSON for scripts.
package merge

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/attribution/merge"
	"github.com/coldtrace/coldtrace/report/format"
)

// Schema names the JSON format of `coldtrace merge --json`.
// v2 added "verdict"; "summary" holds the same sentence for one more
// release (deprecated).
const Schema = "coldtrace.merge/v2"

type document struct {
	Schema string `json:"schema"`
	// Verdict is the answer in one sentence (Sentence).
	Verdict string `json:"verdict"`
	// Summary is Verdict under its v1 name (deprecated).
	Summary string `json:"summary"`
	*merge.Job
}

// WriteJSON writes the job as indented JSON.
func WriteJSON(w io.Writer, job *merge.Job) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	sentence := Sentence(job)
	if err := enc.Encode(document{Schema: Schema, Verdict: sentence, Summary: sentence, Job: job}); err != nil {
		return fmt.Errorf("write merge JSON: %w", err)
	}
	return nil
}

// Sentence says which rank was slowest and why, against the median rank:
// "rank 3 was 41s slower than the median rank (rank 1): 38s more disk
// reads — its node did not have model.safetensors cached."
func Sentence(job *merge.Job) string {
	if len(job.Ranks) < 2 || job.Why == nil {
		return "One record: nothing to compare it with."
	}
	slow, med := job.Ranks[job.Slowest], job.Ranks[job.Median]
	v := job.Why
	if v.Kind != compare.Slower {
		return fmt.Sprintf("All %d ranks took about as long (slowest %s: %s, median %s: %s).",
			len(job.Ranks), format.Escape(slow.Name), format.Duration(slow.WallNS), format.Escape(med.Name), format.Duration(med.WallNS))
	}
	s := fmt.Sprintf("%s was %s slower than the median rank (%s, %s)", format.Escape(slow.Name),
		format.Duration(v.DeltaNS), format.Escape(med.Name), format.Duration(med.WallNS))
	for i, c := range v.With {
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		s += fmt.Sprintf("%s%s more %s%s", sep, format.Duration(c.DeltaNS), c.Category.Label(), reason(c))
	}
	return s + "."
}

// reason says why a category grew on the slowest rank.
func reason(c compare.Change) string {
	switch c.Category {
	case attribution.DiskRead:
		if len(c.Files) > 0 {
			return " — its node did not have " + format.Files(c.Files) + " cached"
		}
		if c.BBytesFromDisk > c.ABytesFromDisk {
			return fmt.Sprintf(" — %s read from disk against %s", format.Bytes(c.BBytesFromDisk), format.Bytes(c.ABytesFromDisk))
		}
	case attribution.JITCompile:
		var parts []string
		for _, k := range c.Caches {
			parts = append(parts, fmt.Sprintf("%s more %s cache %s", format.Count(k.Count), format.Escape(k.Name), format.Plural(k.Count, "miss", "misses")))
		}
		for _, x := range c.Compilers {
			parts = append(parts, fmt.Sprintf("%s ran %s against %s", format.Escape(x.Name), format.Times(x.BRuns), format.Times(x.ARuns)))
		}
		if len(parts) > 0 {
			return " — " + strings.Join(parts, ", ")
		}
	case attribution.Download:
		if len(c.Downloads) > 0 {
			names := make([]string, len(c.Downloads))
			for i, d := range c.Downloads {
				names[i] = d.Name
			}
			return " — it downloaded " + format.Files(names)
		}
	case attribution.GPUCompute:
		if c.GPU != nil {
			return fmt.Sprintf(" — GPU mean utilization %.0f%% against %.0f%%", c.GPU.BUtilMeanPct, c.GPU.AUtilMeanPct)
		}
	}
	return ""
}

// WriteText writes the job for people: the sentence, a table of ranks by
// category, the causes all ranks shared and those only some had, and the
// warnings.
func WriteText(w io.Writer, job *merge.Job) error {
	var b strings.Builder
	cmd := ""
	if len(job.Ranks) > 0 {
		cmd = format.EscapeAll(job.Ranks[job.Slowest].Command)
	}
	fmt.Fprintf(&b, "coldtrace merge: %d %s of %s\n\n%s\n\n", len(job.Ranks), format.Plural(uint64(len(job.Ranks)), "record", "records"), cmd, Sentence(job))

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"", "rank", "host", "wall"}
	for _, c := range attribution.Categories {
		head = append(head, c.Label())
	}
	head = append(head, "verdict")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for i, r := range job.Ranks {
		mark := " "
		switch i {
		case job.Slowest:
			mark = "*"
		case job.Median:
			mark = "~"
		}
		cols := []string{mark, format.Escape(r.Name), format.Escape(r.Host), format.Duration(r.WallNS)}
		for _, row := range r.Rows {
			cols = append(cols, format.Duration(row.NS))
		}
		cols = append(cols, string(r.Verdict.Kind))
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("  (* slowest, ~ median)\n")

	writeCauses(&b, "causes common to all ranks", job.Common, false)
	writeCauses(&b, "causes particular to some ranks", job.Particular, true)
	for _, warn := range job.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s\n", format.Escape(warn))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCauses(b *strings.Builder, title string, cs []merge.Cause, withRanks bool) {
	fmt.Fprintf(b, "\n%s:\n", title)
	if len(cs) == 0 {
		b.WriteString("  none\n")
		return
	}
	for _, c := range cs {
		fmt.Fprintf(b, "  %s (%s)", causeWords(c), format.Duration(c.NS))
		if withRanks {
			fmt.Fprintf(b, " — %s", format.Escape(strings.Join(c.Ranks, ", ")))
		}
		b.WriteString("\n")
	}
}

func causeWords(c merge.Cause) string {
	switch c.Kind {
	case merge.PageCache:
		return "not in the page cache: " + format.Path(c.Name, format.PathWidth)
	case merge.ColdCache:
		return "cold " + format.Escape(c.Name) + " cache"
	case merge.Downloaded:
		return "downloaded: " + format.Path(c.Name, format.PathWidth)
	}
	return format.Escape(c.Name)
}
