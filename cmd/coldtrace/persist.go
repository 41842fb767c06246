package main

import (
	"fmt"
	"io"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/summary"
	"github.com/coldtrace/coldtrace/report/text"
	"github.com/coldtrace/coldtrace/report/words"
)

// writePersist writes `report --persist`: a comment per cache this run
// wrote, then the export lines that keep them, as a script sh accepts.
// Records travel between users and hosts, so nothing in them may run
// or reach the terminal: comments carry escaped text (no newline can end
// one early), export lines only single-quoted values that hold no
// control character (advice.Persist.Skipped says which were left out).
func writePersist(w io.Writer, rec *record.Record) error {
	list := advice.PersistList(rec)
	var lines []string
	for _, p := range list {
		surv := p.Survival
		if surv == "" {
			surv = "survival unknown"
		}
		line := fmt.Sprintf("# %s: %s (%s, %s), rerun cost without it %.2f s", format.Escape(p.Cache), format.Escape(p.Root),
			format.Escape(p.FS), format.Escape(surv), float64(p.RerunNS)/1e9)
		if p.Env == "" {
			line += "; no variable moves it"
		}
		lines = append(lines, line)
	}
	for _, c := range advice.MayBeCaches(rec) {
		lines = append(lines, "# "+format.Escape(words.Finding(c)))
	}
	for _, p := range list {
		if p.Skipped != "" {
			lines = append(lines, fmt.Sprintf("# skipped: %s: %s", format.Escape(p.Env), p.Skipped))
		}
	}
	lines = append(lines, advice.Exports(list)...)
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return fmt.Errorf("write persist lines: %w", err)
		}
	}
	return nil
}

// writeReportBaseline is writeReport with a baseline record for the
// text and JSON formats' read rates.
func writeReportBaseline(a actor.Actor, path, format string, stdout io.Writer, rec, baseline *record.Record, top int) error {
	if baseline == nil || (format != "text" && format != "json") {
		return writeReport(a, path, format, stdout, rec, nil, top)
	}
	render := func(w io.Writer) error {
		res := attribution.Analyze(rec)
		if format == "json" {
			return summary.WriteBaseline(w, rec, res, baseline)
		}
		return text.Write(w, rec, res, text.Options{TopFiles: top, Baseline: baseline})
	}
	if path == "" || path == outfile.Stdout {
		return render(stdout)
	}
	return outfile.Write(a, path, render)
}
