package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/record"
)

// reportExports are report's --pprof PATH and --timeline PATH: the same
// flags, meaning the same, as on run and attach.
type reportExports struct {
	exportOptions
	fs *pflag.FlagSet
}

func (r *reportExports) addFlags(fs *pflag.FlagSet) {
	r.fs = fs
	r.exportOptions.addFlags(fs)
}

// given lists the exports named on the command line.
func (r reportExports) given() []outfile.Output {
	var outs []outfile.Output
	if r.fs.Changed("pprof") {
		outs = append(outs, outfile.Output{Flag: "--pprof", Path: r.pprofPath})
	}
	if r.fs.Changed("timeline") {
		outs = append(outs, outfile.Output{Flag: "--timeline", Path: r.timelinePath})
	}
	return outs
}

// takesStdout says whether an export goes to stdout ("-"), in place of
// the report's own document.
func (r reportExports) takesStdout() bool {
	for _, o := range r.given() {
		if o.Path == outfile.Stdout {
			return true
		}
	}
	return false
}

// check refuses, before the record is read, exports that could not be
// written, and two outputs on stdout: at most one of --pprof -,
// --timeline - and -o - (the report itself goes to stdout unless -o
// names a file or an export takes stdout).
func (r reportExports) check(a actor.Actor, docToStdout bool, stdout io.Writer) error {
	onStdout := 0
	if docToStdout {
		onStdout++
	}
	var files []outfile.Output
	for _, o := range r.given() {
		if o.Path != outfile.Stdout {
			files = append(files, o)
			continue
		}
		onStdout++
		if err := binaryToTerminalWriter(o.Flag, stdout); err != nil {
			return err
		}
	}
	if onStdout > 1 {
		return fmt.Errorf("%w: more than one output names stdout (-); give the others a PATH", errUsage)
	}
	return outfile.Check(a, files...)
}

// binaryToTerminalWriter refuses pprof's gzip on a terminal.
func binaryToTerminalWriter(flag string, w io.Writer) error {
	if flag == "--pprof" && isTerminal(w) {
		return fmt.Errorf("--pprof -: the output is binary (gzip) and stdout is a terminal; redirect it to a file or a pipe")
	}
	return nil
}

// prepare runs before the record is read: it says a deprecated --format
// (f is the resolved format), and checks the exports and the report's
// own -o (out). Without -o an export to stdout takes the report's place;
// -o - keeps the report there, and the two would collide.
func (r reportExports) prepare(a actor.Actor, f, out string, stdout, stderr io.Writer) error {
	if r.fs.Changed("format") {
		deprecatedFormat(stderr, f)
	}
	outGiven := r.fs.Changed("output")
	if err := r.check(a, outGiven && out == outfile.Stdout, stdout); err != nil {
		return err
	}
	return checkReportOutput(a, outGiven, out, f, stdout)
}

// writeFirst writes the exports that were asked for, before the report;
// done says stdout carried one, so there is no report to print.
func (r reportExports) writeFirst(a actor.Actor, stdout io.Writer, rec *record.Record) (done bool, err error) {
	if err := r.exportOptions.write(a, stdout, rec, nil); err != nil {
		return false, err
	}
	return r.takesStdout() && !r.fs.Changed("output"), nil
}

// deprecatedFormat tells stderr that --format FORMAT (other than text)
// goes in the next release, and what replaces it.
func deprecatedFormat(stderr io.Writer, f string) {
	instead := map[string]string{"json": "--json", "pprof": "--pprof PATH", "perfetto": "--timeline PATH"}[f]
	if instead == "" {
		return
	}
	fmt.Fprintf(stderr, "coldtrace: warning: --format %s is deprecated and goes in the next release; use %s\n", f, instead)
}
