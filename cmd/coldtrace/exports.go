package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/pprof"
	"github.com/coldtrace/coldtrace/report/summary"
	"github.com/coldtrace/coldtrace/report/text"
	"github.com/coldtrace/coldtrace/report/timeline"
)

// exportOptions are a run's export flags.
type exportOptions struct {
	pprofPath    string
	timelinePath string
}

// addFlags registers --pprof and --timeline on fs.
func (o *exportOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.pprofPath, "pprof", "", "write the breakdown as a pprof profile to `PATH` (go tool pprof -http=: PATH)")
	fs.StringVar(&o.timelinePath, "timeline", "", "write a timeline (Chrome trace JSON, for ui.perfetto.dev) to `PATH`")
}

// write writes the exports that were asked for, with a's rights ("-":
// stdout); res may be nil. runCommand checked the paths before the run
// (checkRunOutputs).
func (o exportOptions) write(a actor.Actor, stdout io.Writer, rec *record.Record, res *attribution.Result) error {
	return writeExports(a, stdout, rec, res, o.pprofPath, o.timelinePath)
}

// writeExports writes the pprof profile of rec to pprofPath and its
// timeline to timelinePath, each atomically with a's rights; an empty
// path skips that export. res is rec's attribution (nil: computed here).
// It tries both and returns every error.
func writeExports(a actor.Actor, stdout io.Writer, rec *record.Record, res *attribution.Result, pprofPath, timelinePath string) error {
	if pprofPath == "" && timelinePath == "" {
		return nil
	}
	if res == nil {
		res = attribution.Analyze(rec)
	}
	var errs []error
	if pprofPath != "" {
		errs = append(errs, writeStdoutOr(a, pprofPath, stdout, func(w io.Writer) error { return pprof.Write(w, rec, res) }))
	}
	if timelinePath != "" {
		errs = append(errs, writeStdoutOr(a, timelinePath, stdout, func(w io.Writer) error { return timeline.Write(w, rec, res) }))
	}
	return errors.Join(errs...)
}

// reportFormats are the formats of `coldtrace report --format`.
var reportFormats = []string{"text", "json", "pprof", "perfetto"}

// reportFormat resolves the report's format flag: --json is short for
// --format json; "timeline" and "chrome" are other names for perfetto.
func reportFormat(format string, asJSON bool) (string, error) {
	f := strings.ToLower(strings.TrimSpace(format))
	switch f {
	case "", "text":
		f = "text"
		if asJSON {
			f = "json"
		}
	case "timeline", "chrome", "trace":
		f = "perfetto"
	}
	if !slices.Contains(reportFormats, f) {
		return "", fmt.Errorf("%w: unknown format %q (want %s)", errUsage, format, strings.Join(reportFormats, ", "))
	}
	if asJSON && f != "json" {
		return "", fmt.Errorf("%w: --json conflicts with --format %s", errUsage, f)
	}
	return f, nil
}

// renderReport writes rec to w in format (one of reportFormats). res is
// rec's attribution (nil: computed here); top is the number of files the
// text lists.
func renderReport(format string, w io.Writer, rec *record.Record, res *attribution.Result, top int) error {
	if res == nil {
		res = attribution.Analyze(rec)
	}
	switch format {
	case "text":
		return text.Write(w, rec, res, text.Options{TopFiles: top})
	case "json":
		return summary.Write(w, rec, res)
	case "pprof":
		return pprof.Write(w, rec, res)
	case "perfetto":
		return timeline.Write(w, rec, res)
	case "persist":
		return writePersist(w, rec)
	}
	return fmt.Errorf("%w: unknown format %q (want %s)", errUsage, format, strings.Join(reportFormats, ", "))
}

// writeReport renders rec in format to path, atomically with a's rights,
// or to stdout when path is "" or "-". res may be nil.
func writeReport(a actor.Actor, path, format string, stdout io.Writer, rec *record.Record, res *attribution.Result, top int) error {
	if path == "" || path == outfile.Stdout {
		return renderReport(format, stdout, rec, res, top)
	}
	return outfile.Write(a, path, func(w io.Writer) error { return renderReport(format, w, rec, res, top) })
}

// checkReportOutput refuses, before any record is read, the -o of report
// or diff that could not be written: an empty path, a file that is not
// regular, a place the user may not write; and binary data (pprof) for a
// terminal.
func checkReportOutput(a actor.Actor, given bool, path, format string, stdout io.Writer) error {
	if !given {
		path = outfile.Stdout
	}
	if path == outfile.Stdout {
		if format == "pprof" && isTerminal(stdout) {
			return errors.New("the pprof format is binary (gzip) and stdout is a terminal; give -o PATH or redirect stdout")
		}
		return nil
	}
	return outfile.Check(a, outfile.Output{Flag: "-o", Path: path})
}

// readRecordAs reads a record file with a's rights (a pipe from the user's
// shell, as in `report <(...)`, works too).
func readRecordAs(a actor.Actor, path string) (*record.Record, error) {
	f, err := a.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := record.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}
