package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record"
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
	if fs.NArg() != 2 {
		return fail(stderr, exitUsage, fmt.Errorf("%w: diff takes two record files, got %d arguments; usage: coldtrace diff [--json] A B", errUsage, fs.NArg()))
	}
	a, err := record.ReadFile(fs.Arg(0))
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	b, err := record.ReadFile(fs.Arg(1))
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	d := compare.New(a, b, nil, nil)
	render := func(w io.Writer) error {
		if *asJSON {
			return diff.WriteJSON(w, d)
		}
		return diff.WriteText(w, d, diff.TextOptions{TopFiles: *top})
	}
	if *out == "" || *out == "-" {
		err = render(stdout)
	} else {
		err = record.WriteFileAtomic(*out, render)
	}
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	// The text carries its warnings; JSON and file output get them on
	// stderr too, where a person will see them.
	if *asJSON || (*out != "" && *out != "-") {
		for _, w := range d.Warnings {
			fmt.Fprintf(stderr, "coldtrace: warning: %s\n", format.Escape(w))
		}
	}
	return 0
}
