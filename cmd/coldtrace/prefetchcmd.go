package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

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
	fs := newFlagSet("coldtrace prefetch", "usage: coldtrace prefetch [--dry-run] [--force] PATH...|--from RECORD\n\n"+
		"Reads into the page cache only the ranges of these files (directories recursively) that are not\n"+
		"cached, several files at once. Refuses when they would not fit, unless --force.\n\nflags:\n", stderr)
	from := fs.String("from", "", "prefetch the files `RECORD` read from disk, in the order it read them")
	dryRun := fs.Bool("dry-run", false, "list what would be read, read nothing")
	force := fs.Bool("force", false, "read even when it does not fit in memory (MemAvailable, the memory cgroup's limit)")
	workers := fs.Int("jobs", 4, "files read at once")
	asJSON := fs.Bool("json", false, "print JSON")
	var doc documentOutput
	doc.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return parseFailed(stderr, err)
	}
	if *from == "" && fs.NArg() == 0 {
		return fail(stderr, exitUsage, fmt.Errorf("%w: nothing to prefetch; usage: coldtrace prefetch PATH...|--from RECORD", errUsage))
	}
	if *workers < 1 {
		return fail(stderr, exitUsage, fmt.Errorf("%w: --jobs %d: want at least 1", errUsage, *workers))
	}
	who, err := invokingUser()
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if err := doc.check(who.actor); err != nil {
		return fail(stderr, exitUsage, err)
	}
	paths, in, err := targetPaths(who, *from, fs.Args(), stderr)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	var rate float64
	if in != nil {
		rate = in.diskRate
	}
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
	if *dryRun {
		if err := doc.write(who.actor, stdout, func(w io.Writer) error { return writePrefetchPlan(w, plan, rate, fit, *asJSON) }); err != nil {
			return fail(stderr, exitFailure, err)
		}
		return partial
	}
	if fit != nil && !*force {
		return fail(stderr, exitFailure, fmt.Errorf("prefetch refused: %w (--force reads anyway)", fit))
	}
	if fit != nil {
		fmt.Fprintf(stderr, "coldtrace: warning: %s; reading anyway (--force)\n", errorText(fit))
	}

	// A signal stops the reads between chunks; what was read stays cached.
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
	opt := residency.Options{Workers: *workers}
	if isTerminal(stderr) {
		opt.OnProgress = func(p residency.Progress) { fmt.Fprintf(stderr, "\r\033[K%s", progressLine(p)) }
	}
	res := residency.Prefetch(ctx, who.actor, plan, opt)
	if opt.OnProgress != nil {
		fmt.Fprint(stderr, "\n")
	}
	for _, f := range res.Files {
		if f.Err != nil {
			fmt.Fprintf(stderr, "coldtrace: %s: %s\n", format.Escape(f.Path), errorText(f.Err))
			partial = exitPartial
		}
	}
	err = doc.write(who.actor, stdout, func(w io.Writer) error { return writePrefetchResult(w, plan, res, *asJSON) })
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if ctx.Err() != nil && res.ReadBytes < plan.MissingBytes {
		return fail(stderr, exitFailure, errors.New("prefetch interrupted"))
	}
	return partial
}

// writePrefetchResult says what was read.
func writePrefetchResult(w io.Writer, plan residency.Plan, res residency.Result, asJSON bool) error {
	if asJSON {
		out := prefetchJSON{Schema: prefetchSchema, ReadBytes: res.ReadBytes, TotalBytes: plan.TotalBytes, ElapsedNS: int64(res.Elapsed)}
		for _, f := range res.Files {
			e := prefetchedFile{Path: f.Path, ReadBytes: f.ReadBytes}
			if f.Err != nil {
				e.Error = f.Err.Error()
			}
			out.Files = append(out.Files, e)
		}
		return encodeJSON(w, out)
	}
	_, err := fmt.Fprintf(w, "coldtrace prefetch: read %s of %s (%s; the rest was cached) in %s, %.0f MB/s\n",
		format.Bytes(uint64(res.ReadBytes)), plural(len(plan.Files), "file"), format.Bytes(uint64(plan.TotalBytes)),
		format.Duration(int64(res.Elapsed)), float64(res.ReadBytes)/max(res.Elapsed.Seconds(), 1e-9)/1e6)
	return err
}

// The schema ids of prefetch's two documents: what was read, and with
// --dry-run what would be (a different document, so a reader can tell
// them apart by the id alone).
const (
	prefetchSchema     = "coldtrace.prefetch/v1"
	prefetchPlanSchema = "coldtrace.prefetch-plan/v1"
)

// progressLine is the live line on a terminal.
func progressLine(p residency.Progress) string {
	s := fmt.Sprintf("prefetch: %s of %s, %d/%d files, %.0f MB/s", format.Bytes(uint64(p.DoneBytes)), format.Bytes(uint64(p.TotalBytes)),
		p.FilesDone, p.Files, p.BytesPerSec()/1e6)
	if eta := p.ETA(); eta > 0 {
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

// writePrefetchPlan is --dry-run: what would be read, and whether it fits.
func writePrefetchPlan(w io.Writer, plan residency.Plan, rate float64, fit error, asJSON bool) error {
	var etaNS int64
	if rate > 0 {
		etaNS = int64(float64(plan.MissingBytes) / rate * 1e9)
	}
	if asJSON {
		out := prefetchPlanJSON{Schema: prefetchPlanSchema, DryRun: true, Plan: plan, Fits: fit == nil, Rate: rate, ETANS: etaNS}
		if fit != nil {
			out.Refusal = fit.Error()
		}
		return encodeJSON(w, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "coldtrace prefetch --dry-run: would read %s of %s (%s)\n", format.Bytes(uint64(plan.MissingBytes)),
		plural(len(plan.Files), "file"), format.Bytes(uint64(plan.TotalBytes)))
	for _, f := range plan.Files {
		switch {
		case !f.Known:
			linef(&b, "  %s: all %s (residency unknown: %s)", f.Path, format.Bytes(uint64(f.Size)), f.Unknown)
		case f.MissingBytes == 0:
			linef(&b, "  %s: cached, nothing to read", f.Path)
		default:
			linef(&b, "  %s: %s in %d ranges", f.Path, format.Bytes(uint64(f.MissingBytes)), len(f.Missing))
		}
	}
	if etaNS > 0 {
		fmt.Fprintf(&b, "  about %s at the disk rate of the recorded run (%.0f MB/s)\n", status.RoughDuration(etaNS), rate/1e6)
	}
	if fit != nil {
		linef(&b, "  would refuse: %v (--force reads anyway)", fit)
	} else {
		b.WriteString("  fits in memory\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
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

// prefetchJSON is `coldtrace prefetch --json`: what was read.
type prefetchJSON struct {
	Schema     string           `json:"schema"`
	Files      []prefetchedFile `json:"files"`
	ReadBytes  int64            `json:"read_bytes"`
	TotalBytes int64            `json:"total_bytes"`
	ElapsedNS  int64            `json:"elapsed_ns"`
}

// prefetchedFile is one file of prefetchJSON.
type prefetchedFile struct {
	Path      string `json:"path"`
	ReadBytes int64  `json:"read_bytes"`
	Error     string `json:"error,omitempty"`
}

// prefetchPlanJSON is `coldtrace prefetch --dry-run --json`: what would be
// read, and whether it fits.
type prefetchPlanJSON struct {
	Schema  string         `json:"schema"`
	DryRun  bool           `json:"dry_run"`
	Plan    residency.Plan `json:"plan"`
	Fits    bool           `json:"fits"`
	Refusal string         `json:"refusal,omitempty"`
	Rate    float64        `json:"disk_rate_bytes_per_s,omitempty"`
	ETANS   int64          `json:"eta_ns,omitempty"`
}
