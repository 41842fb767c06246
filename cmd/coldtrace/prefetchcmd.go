package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/status"
	"github.com/coldtrace/coldtrace/residency"
)

// prefetchCommand is `coldtrace prefetch [--dry-run] [--force]
// PATH…|--from RECORD`: read into the page cache exactly what a run
// needs and is not cached, files in the order the run read them, several
// at once, after checking that it fits.
func prefetchCommand(args []string, stdout, stderr io.Writer) int {
	o, err := parsePrefetchFlags(args, stderr)
	if err != nil {
		return parseFailed(stderr, err)
	}
	who, err := invokingUser()
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if err := o.doc.check(who.actor); err != nil {
		return fail(stderr, exitUsage, err)
	}
	paths, in, err := targetPaths(who, o.from, o.paths, stderr)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	rate := in.rate()
	plan, probs := residency.PlanPrefetch(who.actor, paths)
	printProblems(stderr, probs)
	partial := 0
	if len(probs) > 0 {
		partial = exitPartial
	}

	mem, err := residency.ReadMemory()
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	fit := mem.Check(plan.MissingBytes)
	if o.dryRun {
		err := o.doc.writeDocument(who.actor, stdout, o.asJSON, status.NewPrefetchPlanDocument(plan, rate, fit),
			func(w io.Writer) error { return status.WritePrefetchPlanText(w, plan, rate, fit) })
		if err != nil {
			return fail(stderr, exitFailure, err)
		}
		return partial
	}
	if fit != nil && !o.force {
		return fail(stderr, exitFailure, fmt.Errorf("prefetch refused: %w (--force reads anyway)", fit))
	}
	if fit != nil {
		fmt.Fprintf(stderr, "coldtrace: warning: %s; reading anyway (--force)\n", errorText(fit))
	}
	res, interrupted := readPrefetch(who, plan, o.workers, stderr)
	for _, f := range res.Files {
		if f.Err != nil {
			fmt.Fprintf(stderr, "coldtrace: %s: %s\n", format.Escape(f.Path), errorText(f.Err))
			partial = exitPartial
		}
	}
	err = o.doc.writeDocument(who.actor, stdout, o.asJSON, status.NewPrefetchDocument(plan, res),
		func(w io.Writer) error { return status.WritePrefetchText(w, plan, res) })
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if interrupted && res.ReadBytes < plan.MissingBytes {
		return fail(stderr, exitFailure, errors.New("prefetch interrupted"))
	}
	return partial
}

// prefetchOptions are prefetch's flags and paths.
type prefetchOptions struct {
	from    string
	paths   []string
	dryRun  bool
	force   bool
	workers int
	asJSON  bool
	doc     documentOutput
}

func parsePrefetchFlags(args []string, stderr io.Writer) (prefetchOptions, error) {
	var o prefetchOptions
	fs := newFlagSet("coldtrace prefetch", "usage: coldtrace prefetch [--dry-run] [--force] PATH...|--from RECORD\n\n"+
		"Reads into the page cache only the ranges of these files (directories recursively) that are not\n"+
		"cached, several files at once. Refuses when they would not fit, unless --force.\n\nflags:\n", stderr)
	fs.StringVar(&o.from, "from", "", "prefetch the files `RECORD` read from disk, in the order it read them")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list what would be read, read nothing")
	fs.BoolVar(&o.force, "force", false, "read even when it does not fit in memory (MemAvailable, the memory cgroup's limit)")
	fs.IntVar(&o.workers, "jobs", 4, "files read at once")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	o.doc.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	o.paths = fs.Args()
	if o.from == "" && len(o.paths) == 0 {
		return o, fmt.Errorf("%w: nothing to prefetch; usage: coldtrace prefetch PATH...|--from RECORD", errUsage)
	}
	if o.workers < 1 {
		return o, fmt.Errorf("%w: --jobs %d: want at least 1", errUsage, o.workers)
	}
	return o, nil
}

// readPrefetch reads the plan, workers files at once, with a live line
// on a terminal. A signal stops the reads between chunks (interrupted);
// what was read stays cached.
func readPrefetch(who actingUser, plan residency.Plan, workers int, stderr io.Writer) (res residency.Result, interrupted bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, unix.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	opt := residency.Options{Workers: workers}
	if isTerminal(stderr) {
		opt.OnProgress = func(p residency.Progress) { fmt.Fprintf(stderr, "\r\033[K%s", status.ProgressLine(p)) }
	}
	res = residency.Prefetch(ctx, who.actor, plan, opt)
	if opt.OnProgress != nil {
		fmt.Fprint(stderr, "\n")
	}
	return res, ctx.Err() != nil
}

// isTerminal reports whether w is a terminal (the progress line is for
// people, not for logs).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
