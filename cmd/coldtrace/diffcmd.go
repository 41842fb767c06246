package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/report/diff"
	"github.com/coldtrace/coldtrace/report/format"
)

// diffCommand is `coldtrace diff [--json] A B`: two saved records side by
// side, typically a cold run and a warm one.
func diffCommand(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("coldtrace diff", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the diff as JSON (schema "+diff.Schema+")")
	out := fs.StringP("output", "o", "", "write the diff to `PATH` instead of stdout")
	top := fs.Int("top", 10, "files listed in the text diff")
	segs := fs.String("segments", "", "compare two segments `A,B` (numbers or labels) of one RECORD")
	splitIdle := fs.Duration("split-idle", 0, "with --segments on a record without marks: cut at idle stretches of at least `D`")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: coldtrace diff [flags] A B\n\n"+
			"Compares two records written with -o (A typically the cold run, B the warm one):\n"+
			"wall time and each category, files, caches, compilers and GPUs, and why B differs.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return fail(stderr, exitUsage, fmt.Errorf("%w: %v", errUsage, err))
	}
	if fs.Changed("segments") {
		return diffSegments(fs.Args(), *segs, *splitIdle, *asJSON, reportOutput{given: fs.Changed("output"), path: *out}, *top, stdout, stderr)
	}
	if fs.NArg() != 2 {
		return fail(stderr, exitUsage, fmt.Errorf("%w: diff takes two record files, got %d arguments; usage: coldtrace diff [--json] A B", errUsage, fs.NArg()))
	}
	who, err := actor.Resolve("", os.Getenv)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	textFormat := "text"
	if *asJSON {
		textFormat = "json"
	}
	if err := checkReportOutput(who, fs.Changed("output"), *out, textFormat, stdout); err != nil {
		return fail(stderr, exitUsage, err)
	}
	if sameFile(who, fs.Arg(0), fs.Arg(1)) {
		fmt.Fprintf(stderr, "coldtrace: warning: %s and %s are one record: every difference is zero\n",
			format.Escape(fs.Arg(0)), format.Escape(fs.Arg(1)))
	}
	a, err := readRecordAs(who, fs.Arg(0))
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	b, err := readRecordAs(who, fs.Arg(1))
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	return writeDiff(who, compare.New(a, b, nil, nil), *asJSON, *out, *top, stdout, stderr)
}

// reportOutput is a render command's -o: given says the flag was on the
// command line, so an empty path is an error rather than stdout.
type reportOutput struct {
	given bool
	path  string
}

// diffSegments is diff --segments A,B RECORD. The output is checked
// before the record is read, as plain diff does.
func diffSegments(args []string, spec string, splitIdle time.Duration, asJSON bool, out reportOutput, top int, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		return fail(stderr, exitUsage, fmt.Errorf("%w: diff --segments takes one record file, got %d arguments", errUsage, len(args)))
	}
	who, err := actor.Resolve("", os.Getenv)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	textFormat := "text"
	if asJSON {
		textFormat = "json"
	}
	if err := checkReportOutput(who, out.given, out.path, textFormat, stdout); err != nil {
		return fail(stderr, exitUsage, err)
	}
	rec, err := readRecordAs(who, args[0])
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	d, err := compareSegments(rec, spec, splitIdle)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	return writeDiff(who, d, asJSON, out.path, top, stdout, stderr)
}

// writeDiff renders d as text or JSON to stdout or out.
func writeDiff(who actor.Actor, d *compare.Diff, asJSON bool, out string, top int, stdout, stderr io.Writer) int {
	var err error
	render := func(w io.Writer) error {
		if asJSON {
			return diff.WriteJSON(w, d)
		}
		return diff.WriteText(w, d, diff.TextOptions{TopFiles: top})
	}
	if out == "" || out == outfile.Stdout {
		err = render(stdout)
	} else {
		err = outfile.Write(who, out, render)
	}
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	// The text carries its warnings; JSON and file output get them on
	// stderr too, where a person will see them.
	if asJSON || (out != "" && out != "-") {
		for _, w := range d.Warnings {
			fmt.Fprintf(stderr, "coldtrace: warning: %s\n", format.Escape(w))
		}
	}
	return 0
}

// sameFile reports whether paths a and b name one file, as the user sees
// them (a pipe is never the same as another path).
func sameFile(who actor.Actor, a, b string) bool {
	var same bool
	_ = who.Do(func() error {
		sa, err := os.Stat(a)
		if err != nil || !sa.Mode().IsRegular() {
			return err
		}
		sb, err := os.Stat(b)
		if err != nil {
			return err
		}
		same = os.SameFile(sa, sb)
		return nil
	})
	return same
}
