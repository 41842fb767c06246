package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/checkpoint"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/summary"
	"github.com/coldtrace/coldtrace/report/text"
	"github.com/coldtrace/coldtrace/trace"
)

type runOptions struct {
	traceOutputOptions
	sensorOptions
	interval    time.Duration
	user        string
	checkpoints checkpointOptions
	cold        coldOptions
	metrics     metricsOptions
	command     []string
	// splitIdle cuts an unmarked run at idle stretches (--split-idle).
	splitIdle time.Duration
	// ready names the mark at which the program was ready (--ready).
	ready string
	// changed holds the flags given on the command line, by name: an
	// output flag given an empty path is an error, not "no output".
	changed map[string]bool
}

func parseRunFlags(args []string, stderr io.Writer) (runOptions, error) {
	var o runOptions
	fs := pflag.NewFlagSet("coldtrace run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SetInterspersed(false) // the command's own flags are not ours
	o.traceOutputOptions.addFlags(fs)
	o.sensorOptions.addFlags(fs)
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "timeline sampling period")
	fs.StringVar(&o.user, "user", "", "run the command as `NAME` (real root login only; under sudo the command runs as you)")
	o.checkpoints.addFlags(fs)
	o.checkpoints.addKillOnExitFlag(fs)
	o.cold.addFlags(fs)
	o.metrics.addFlags(fs)
	fs.DurationVar(&o.splitIdle, "split-idle", 0, "without marks, cut the run into segments at idle stretches of at least `D`")
	fs.StringVar(&o.ready, "ready", "", "the program is ready at the first mark labelled `LABEL` (default: the first mark); compiles after it are called out")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: sudo coldtrace [run] [flags] -- COMMAND [ARGS...]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	o.command = fs.Args()
	o.changed = map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { o.changed[f.Name] = true })
	if err := checkJSONTargets(o.changed); err != nil {
		return o, err
	}
	if err := o.sensorOptions.check(); err != nil {
		return o, err
	}
	if err := o.cold.check(o.command); err != nil {
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if len(o.command) == 0 {
		return o, fmt.Errorf("%w: no command given; usage: sudo coldtrace [flags] -- COMMAND [ARGS...]", errUsage)
	}
	if o.interval < time.Millisecond {
		return o, fmt.Errorf("%w: --interval %v is below 1ms", errUsage, o.interval)
	}
	return o, nil
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer, launched time.Time) int {
	catchSIGPIPE()
	stderr = stopOnEPIPE(stderr)
	o, err := parseRunFlags(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	// Taken first, before coldtrace opens descriptors of its own.
	var jsonFD *os.File
	if o.changed["json-fd"] {
		if jsonFD, err = openJSONFD(o.jsonFD); err != nil {
			return fail(stderr, exitUsage, err)
		}
		defer jsonFD.Close()
	}
	// Who coldtrace works for: under sudo the invoking user, whose rights
	// create the outputs and run the command.
	a, err := actor.Resolve(o.user, os.Getenv)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	// An output that cannot be written must fail now, not after an hour's
	// run.
	stdoutFile, _ := stdout.(*os.File)
	if err := checkRunOutputs(a, runOutputs(o), stdoutFile, os.Stdout); err != nil {
		return fail(stderr, exitUsage, err)
	}
	stdout = stopOnEPIPE(stdout) // checked as a file above; from here on only written
	warnMissingInputs(a, o.cacheDirs, o.jitUprobes, func(msg string) {
		fmt.Fprintf(stderr, "coldtrace: warning: %s\n", msg)
	})
	ckpt := o.checkpoints.writer(a, o.recordPath, launched, stderr)
	if err := o.metrics.check(a); err != nil {
		return fail(stderr, exitUsage, err)
	}
	rec, err := traceRun(ctx, o, a, ckpt, launched, stderr)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	failed := writeRunOutputs(ctx, o, a, jsonFD, stdout, stderr, rec)
	finishCheckpoints(ckpt, failed, stderr)
	if failed && rec.ExitCode == 0 {
		return exitFailure
	}
	return rec.ExitCode
}

// traceRun makes the run cold when asked, traces the command with its
// marks and checkpoints, and returns the record with what --cold did and
// the labels.
func traceRun(ctx context.Context, o runOptions, a actor.Actor, ckpt *checkpoint.Writer, launched time.Time, stderr io.Writer) (*record.Record, error) {
	// Signals are cmd's from here on: during the run they go to the
	// command (trace.Options.Signals); once it has exited they are caught
	// and dropped, so writing the outputs is not interrupted, nor the
	// exit code changed (catchSignals).
	sigs := catchSignals()

	cold, err := o.cold.prepare(a, stderr)
	if err != nil {
		return nil, err
	}
	defer cold.Cleanup(stderr)

	ml, env := runMarks(a, cold.Environ(), stderr)
	if ml != nil {
		defer ml.Close()
	}
	settle := looseHeapWhileLoading(os.Getenv)
	defer settle()
	opts := trace.Options{
		Loaded:   settle,
		Command:  o.command,
		Interval: o.interval,
		Actor:    a,
		Launched: launched,
		Env:      env,
		Marks:    markChannel(ml),
		OnStart:  func(pid int) { trackedBy(ml, pid, stderr) },
		Version:  version,
		Signals:  sigs,
		Notify:   func(msg string) { fmt.Fprintf(stderr, "coldtrace: %s\n", msg) },

		Checkpoint:      checkpointFunc(ckpt),
		CheckpointEvery: o.checkpoints.every,
		KillOnExit:      o.checkpoints.killOnExit,
	}
	o.sensorOptions.apply(&opts, os.Getenv, stderr)
	rec, err := trace.Run(ctx, opts)
	if err != nil {
		return nil, err
	}
	if rec.StartError != "" {
		fmt.Fprintf(stderr, "coldtrace: cannot run %s\n", format.Escape(rec.StartError))
	}
	cold.Cleanup(stderr) // before the outputs, so the record says whether the caches stayed
	rec.MadeCold = cold.Record()
	rec.Labels = o.metrics.labels
	return rec, nil
}

// writeRunOutputs analyses the record and writes every output asked
// for; failed says one could not be written (its line is on stderr).
func writeRunOutputs(ctx context.Context, o runOptions, a actor.Actor, jsonFD *os.File, stdout, stderr io.Writer, rec *record.Record) (failed bool) {
	markReady(rec, o.ready, o.splitIdle.Nanoseconds())
	splitIdleMarks(rec, o.splitIdle.Nanoseconds())
	res := attribution.Analyze(rec)
	report := func(err error, what string) {
		if err != nil {
			fmt.Fprintf(stderr, "coldtrace: error: %s%v\n", what, err)
			failed = true
		}
	}
	if o.changed["output"] {
		report(writeStdoutOr(a, o.recordPath, stdout, func(w io.Writer) error { return record.Encode(w, rec) }), "")
	}
	report(o.exports.write(a, stdout, rec, res), "")
	report(o.metrics.write(ctx, stderr, rec, res), "")
	if o.changed["json"] || jsonFD != nil {
		report(writeJSON(a, o.jsonPath, jsonFD, stdout, rec, res), "")
	}
	if !o.quiet {
		report(text.Write(stderr, rec, res, text.Options{TopFiles: o.topFiles}), "write the summary: ")
		report(writeRunSegments(stderr, rec, o.splitIdle.Nanoseconds()), "write the segments: ")
	}
	return failed
}

// writeJSON writes the JSON summary to fd (--json-fd) when it is set,
// else to path or stdout (--json).
func writeJSON(a actor.Actor, path string, fd *os.File, stdout io.Writer, rec *record.Record, res *attribution.Result) error {
	if fd != nil {
		if err := summary.Write(fd, rec, res); err != nil {
			return fmt.Errorf("--json-fd %s: %w", fd.Name(), err)
		}
		return nil
	}
	return writeStdoutOr(a, path, stdout, func(w io.Writer) error { return summary.Write(w, rec, res) })
}

// reportOptions are report's flags and its record.
type reportOptions struct {
	asJSON       bool
	top          int
	format       string
	out          string
	segs         bool
	splitIdle    time.Duration
	persist      bool
	baselinePath string
	exports      reportExports
	record       string
}

func parseReportFlags(args []string, stderr io.Writer) (reportOptions, error) {
	var o reportOptions
	fs := pflag.NewFlagSet("coldtrace report", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.asJSON, "json", false, "print the JSON summary instead of text")
	fs.IntVar(&o.top, "top", defaultTop, "files listed in the text summary")
	fs.StringVar(&o.format, "format", "text", "output `FORMAT`: text, json, pprof or perfetto (all but text deprecated: use --json, --pprof PATH, --timeline PATH)")
	fs.StringVarP(&o.out, "output", "o", "", "write to `PATH` instead of stdout")
	fs.BoolVar(&o.segs, "segments", false, "print one row per segment (marks, or --split-idle cuts)")
	fs.DurationVar(&o.splitIdle, "split-idle", 0, "with --segments on a record without marks: cut at idle stretches of at least `D`")
	fs.BoolVar(&o.persist, "persist", false, "print the shell export lines that keep the caches this run wrote (valid sh)")
	fs.StringVar(&o.baselinePath, "baseline", "", "sequential read rates per device from `RECORD` when this run has none, and the cache roots it wrote entries in")
	o.exports.addFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: coldtrace report [flags] RECORD\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() != 1 {
		return o, fmt.Errorf("report takes one record file, got %d arguments", fs.NArg())
	}
	o.record = fs.Arg(0)
	return o, nil
}

func reportCommand(args []string, stdout, stderr io.Writer) int {
	o, err := parseReportFlags(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	f, err := reportFormat(o.format, o.asJSON)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	a, err := actor.Resolve("", os.Getenv)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	if err := o.exports.prepare(a, f, o.out, stdout, stderr); err != nil {
		return fail(stderr, exitUsage, err)
	}
	rec, err := readRecordAs(a, o.record)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if done, err := o.exports.writeFirst(a, stdout, rec); err != nil || done {
		if err != nil {
			return fail(stderr, exitFailure, err)
		}
		return 0 // stdout carried the export
	}
	if err := o.write(a, f, stdout, rec); err != nil {
		return fail(stderr, exitFailure, err)
	}
	return 0
}

// write renders rec in format f: its segments, its persist lines or
// its report (against --baseline when given).
func (o reportOptions) write(a actor.Actor, f string, stdout io.Writer, rec *record.Record) error {
	switch {
	case o.segs:
		path := o.out
		if path == "" {
			path = outfile.Stdout
		}
		return writeStdoutOr(a, path, stdout, func(w io.Writer) error { return writeSegments(w, rec, o.splitIdle, f == "json") })
	case o.persist:
		return writeReport(a, o.out, "persist", stdout, rec, nil, 0)
	}
	var baseline *record.Record
	if o.baselinePath != "" {
		var err error
		if baseline, err = readRecordAs(a, o.baselinePath); err != nil {
			return fmt.Errorf("--baseline: %w", err)
		}
	}
	return writeReportBaseline(a, o.out, f, stdout, rec, baseline, o.top)
}
