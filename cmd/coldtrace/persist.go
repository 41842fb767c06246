package main

import (
	"fmt"
	"io"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/summary"
	"github.com/coldtrace/coldtrace/report/text"
)

// writePersist writes `report --persist`: a comment per cache this run
// wrote, then the export lines that keep them, as a script sh accepts.
func writePersist(w io.Writer, rec *record.Record) error {
	list := advice.PersistList(rec)
	for _, p := range list {
		surv := p.Survival
		if surv == "" {
			surv = "survival unknown"
		}
		// Comments hold paths from the record: one line each, no newline
		// can end the comment early.
		line := fmt.Sprintf("# %s: %s (%s, %s), rerun cost without it %.2f s", p.Cache, p.Root, p.FS, surv, float64(p.RerunNS)/1e9)
		if p.Env == "" {
			line += "; no variable moves it"
		}
		if _, err := fmt.Fprintln(w, oneLine(line)); err != nil {
			return fmt.Errorf("write persist lines: %w", err)
		}
	}
	for _, e := range advice.Exports(list) {
		if _, err := fmt.Fprintln(w, e); err != nil {
			return fmt.Errorf("write persist lines: %w", err)
		}
	}
	return nil
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
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
