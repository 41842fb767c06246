package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/trace/doctor"
)

// exitDoctorFailed is doctor's exit code when a check failed; usage
// errors keep exitUsage.
const exitDoctorFailed = 1

func doctorCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runDoctor(ctx, args, stdout, stderr, doctor.Options{})
}

// runDoctor runs the check-up with base, which tests use to hide a
// tracepoint (doctor.Options.Hide); flags fill in the rest.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer, base doctor.Options) int {
	fs := newFlagSet("coldtrace doctor", "usage: sudo coldtrace doctor [--dir DIR]\n\nchecks that coldtrace can trace here and counts right; exit 0 when all is well\n\nflags:\n", stderr)
	fs.StringVar(&base.Dir, "dir", "", "check page-cache counting on the filesystem of `DIR` (default: the current directory)")
	err := fs.Parse(args)
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return fail(stderr, exitUsage, err)
	}
	if fs.NArg() > 0 {
		return fail(stderr, exitUsage, fmt.Errorf("doctor takes no arguments, got %q", fs.Args()))
	}
	if base.Actor, err = actor.Resolve("", os.Getenv); err != nil {
		return fail(stderr, exitUsage, err)
	}
	r := doctor.Run(ctx, base)
	// Details carry paths (--dir) and what the system said: escaped
	// before they reach the terminal.
	for i := range r.Checks {
		c := &r.Checks[i]
		c.Name, c.Detail, c.Lacks = format.Escape(c.Name), format.Escape(c.Detail), format.Escape(c.Lacks)
	}
	if err := r.Write(stdout); err != nil {
		return fail(stderr, exitFailure, err)
	}
	if failed := r.Failed(); len(failed) > 0 {
		for _, c := range failed {
			fmt.Fprintf(stderr, "coldtrace: doctor: FAILED %s: %s\n", c.Name, c.Detail)
		}
		return exitDoctorFailed
	}
	return 0
}
