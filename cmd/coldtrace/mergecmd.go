package main

import (
	"fmt"
	"io"
	"os"

	"github.com/coldtrace/coldtrace/attribution/merge"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/report/format"
	reportmerge "github.com/coldtrace/coldtrace/report/merge"
)

// mergeCommand is `coldtrace merge [--json] RECORD…`: the records of the
// ranks or nodes of one job, as one answer.
func mergeCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("coldtrace merge", "usage: coldtrace merge [flags] RECORD...\n\n"+
		"Merges the records (-o) of the ranks or nodes of one job, labelled with --label rank=N\n"+
		"or host=NAME: the slowest rank and why against the median rank, each rank's\n"+
		"categories, and the causes all ranks shared or only some had.\n\nflags:\n", stderr)
	asJSON := fs.Bool("json", false, "print the merge as JSON (schema "+reportmerge.Schema+")")
	out := fs.StringP("output", "o", "", "write to `PATH` instead of stdout")
	if err := parseFlags(fs, args); err != nil {
		return parseFailed(stderr, err)
	}
	if fs.NArg() == 0 {
		return fail(stderr, exitUsage, fmt.Errorf("%w: merge takes record files (usage: coldtrace merge [--json] RECORD…)", errUsage))
	}
	// Records are read, and the output written, with the rights of the
	// user coldtrace acts for (under sudo: the invoking user).
	who, err := actor.Resolve("", os.Getenv)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	toFile := fs.Changed("output") && *out != outfile.Stdout // -o "": an error (empty path), never stdout
	if toFile {
		if err := outfile.Check(who, outfile.Output{Flag: "-o", Path: *out}); err != nil {
			return fail(stderr, exitUsage, err)
		}
	}
	var inputs []merge.Input
	for _, path := range fs.Args() {
		r, err := readRecordAs(who, path)
		if err != nil {
			return fail(stderr, exitFailure, err)
		}
		inputs = append(inputs, merge.Input{Source: path, Record: r})
	}
	job, err := merge.Merge(inputs)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	render := func(w io.Writer) error {
		if *asJSON {
			return reportmerge.WriteJSON(w, job)
		}
		return reportmerge.WriteText(w, job)
	}
	if toFile {
		err = outfile.Write(who, *out, render)
	} else {
		err = render(stdout)
	}
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	// The text carries its warnings; JSON and file output get them on
	// stderr too, where a person will see them.
	if *asJSON || toFile {
		for _, w := range job.Warnings {
			fmt.Fprintf(stderr, "coldtrace: warning: %s\n", format.Escape(w))
		}
	}
	return 0
}
