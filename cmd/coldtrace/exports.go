package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/attribution"
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

// check fails early, before the run, when an export path cannot be
// written.
func (o exportOptions) check() error {
	for _, p := range []string{o.pprofPath, o.timelinePath} {
		if p != "" {
			if err := record.CheckWritable(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// write writes the exports that were asked for; res may be nil.
func (o exportOptions) write(rec *record.Record, res *attribution.Result) error {
	return writeExports(rec, res, o.pprofPath, o.timelinePath)
}

// writeExports writes the pprof profile of rec to pprofPath and its
// timeline to timelinePath, each atomically; an empty path skips that
// export. res is rec's attribution (nil: computed here). It tries both and
// returns every error.
func writeExports(rec *record.Record, res *attribution.Result, pprofPath, timelinePath string) error {
	if pprofPath == "" && timelinePath == "" {
		return nil
	}
	if res == nil {
		res = attribution.Analyze(rec)
	}
	var errs []error
	if pprofPath != "" {
		errs = append(errs, record.WriteFileAtomic(pprofPath, func(w io.Writer) error { return pprof.Write(w, rec, res) }))
	}
	if timelinePath != "" {
		errs = append(errs, record.WriteFileAtomic(timelinePath, func(w io.Writer) error { return timeline.Write(w, rec, res) }))
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
	}
	return fmt.Errorf("%w: unknown format %q (want %s)", errUsage, format, strings.Join(reportFormats, ", "))
}

// writeReport renders rec in format to path, atomically, or to stdout
// when path is "" or "-". res may be nil.
func writeReport(path, format string, stdout io.Writer, rec *record.Record, res *attribution.Result, top int) error {
	if path == "" || path == "-" {
		return renderReport(format, stdout, rec, res, top)
	}
	return record.WriteFileAtomic(path, func(w io.Writer) error { return renderReport(format, w, rec, res, top) })
}
