package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/marks"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/checkpoint"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/segments"
	"github.com/coldtrace/coldtrace/report/text"
	"github.com/coldtrace/coldtrace/report/words"
	"github.com/coldtrace/coldtrace/trace"
)

type attachOptions struct {
	traceOutputOptions
	sensorOptions
	pids        []int
	cgroup      string
	duration    time.Duration
	splitIdle   time.Duration
	ready       string
	interval    time.Duration
	checkpoints checkpointOptions
	metrics     metricsOptions
	changed     map[string]bool
}

func parseAttachFlags(args []string, stderr io.Writer) (attachOptions, error) {
	var o attachOptions
	var pidList string
	fs := pflag.NewFlagSet("coldtrace attach", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&pidList, "pid", "", "attach to `PID[,PID...]` and what they fork from now on")
	fs.StringVar(&o.cgroup, "cgroup", "", "attach to the processes of cgroup `DIR` (v1 or v2) and those placed in it later")
	fs.DurationVar(&o.duration, "duration", 0, "detach after `D` (default: at Ctrl-C or when the processes exit)")
	fs.DurationVar(&o.splitIdle, "split-idle", 0, "without marks, cut the run into segments at idle stretches of at least `D`")
	fs.StringVar(&o.ready, "ready", "", "the program is ready at the first mark labelled `LABEL` (default: the first mark); compiles after it are called out")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "timeline sampling period")
	o.traceOutputOptions.addFlags(fs)
	o.sensorOptions.addFlags(fs)
	o.checkpoints.addFlags(fs)
	o.metrics.addFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: sudo coldtrace attach (--pid PID[,PID...] | --cgroup DIR) [flags]\n\n"+
			"Traces processes already running until Ctrl-C, --duration, or their exit.\n"+
			"Mark the trace from any shell with 'coldtrace mark LABEL'.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: attach takes no command (%q); to trace a new command use 'coldtrace run'", errUsage, fs.Arg(0))
	}
	var err error
	if o.pids, err = parsePIDList(pidList); err != nil {
		return o, err
	}
	if len(o.pids) == 0 && o.cgroup == "" {
		return o, fmt.Errorf("%w: give --pid PID or --cgroup DIR", errUsage)
	}
	if o.interval < time.Millisecond {
		return o, fmt.Errorf("%w: --interval %v is below 1ms", errUsage, o.interval)
	}
	o.changed = map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { o.changed[f.Name] = true })
	if err := checkJSONTargets(o.changed); err != nil {
		return o, err
	}
	return o, o.sensorOptions.check()
}

// attachCommand is `coldtrace attach`: trace running processes, with
// marks from `coldtrace mark` cutting the trace into segments.
func attachCommand(ctx context.Context, args []string, stdout, stderr io.Writer, launched time.Time) int {
	catchSIGPIPE()
	stdout, stderr = stopOnEPIPE(stdout), stopOnEPIPE(stderr)
	o, err := parseAttachFlags(args, stderr)
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
	a, err := actor.Resolve("", os.Getenv)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	if code, err := checkAttachInputs(a, &o); err != nil {
		return fail(stderr, code, err)
	}
	warnMissingInputs(a, o.cacheDirs, o.jitUprobes, func(msg string) {
		fmt.Fprintf(stderr, "coldtrace: warning: %s\n", msg)
	})
	ckpt := o.checkpoints.writer(a, o.recordPath, launched, stderr)
	rec, err := attachTrace(ctx, a, o, ckpt, stderr, launched)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	rec.Labels = o.metrics.labels
	code := writeAttachOutputs(ctx, a, o, jsonFD, stdout, stderr, rec)
	finishCheckpoints(ckpt, code != 0, stderr)
	return code
}

// attachTrace listens for marks and traces the processes o names until
// the trace ends.
func attachTrace(ctx context.Context, a actor.Actor, o attachOptions, ckpt *checkpoint.Writer, stderr io.Writer, launched time.Time) (*record.Record, error) {
	sigs := catchSignals() // installed until exit: a late signal must not change the exit code
	l, err := marks.Listen(marks.Dir, int(a.UID), int(a.GID))
	if err != nil {
		return nil, err
	}
	defer l.Close()
	notify := func(msg string) {
		if !o.quiet {
			fmt.Fprintf(stderr, "coldtrace: %s\n", format.Escape(msg))
		}
	}
	settle := looseHeapWhileLoading(os.Getenv)
	defer settle()
	opts := trace.Options{Interval: o.interval, Actor: a, Launched: launched, Version: version, Loaded: settle,
		Signals: sigs, Notify: notify, Checkpoint: checkpointFunc(ckpt), CheckpointEvery: o.checkpoints.every}
	o.sensorOptions.apply(&opts, os.Getenv, stderr)
	return trace.Attach(ctx, trace.AttachOptions{
		Options: opts,
		PIDs:    o.pids, Cgroup: o.cgroup, Duration: o.duration, Marks: l.C,
		Check: func(pid int) error {
			if err := a.MayTrace(pid); err != nil {
				return err
			}
			if tracer, err := marks.TracedBy(marks.Dir, pid); err == nil && tracer != 0 {
				return fmt.Errorf("pid %d is traced already by coldtrace (pid %d)", pid, tracer)
			}
			return nil
		},
		OnTracking: func(pids []int) {
			if err := l.Tracing(pids); err != nil {
				notify(err.Error())
			}
		},
		OnAttached: func(att record.Attached) {
			notify(fmt.Sprintf("attached: %s; mark with: coldtrace mark LABEL (socket %s)",
				words.AttachCounts(att), l.Path()))
		},
	})
}

// checkAttachInputs checks what the user named before anything is
// attached: every output (not found unwritable, or an empty path, once
// the trace is over), the cgroup directory (resolved with the user's
// rights, into o), and that no pid is traced already. The int is the
// exit code of the error.
func checkAttachInputs(a actor.Actor, o *attachOptions) (int, error) {
	if err := outfile.Check(a, givenOutputs(o.changed, o.recordPath, o.jsonPath, o.exports)...); err != nil {
		return exitUsage, err
	}
	if err := o.metrics.check(a); err != nil {
		return exitUsage, err
	}
	if o.cgroup != "" {
		var err error
		if o.cgroup, err = reachCgroup(a, o.cgroup); err != nil {
			return exitFailure, err
		}
	}
	for _, pid := range o.pids {
		if tracer, err := marks.TracedBy(marks.Dir, pid); err != nil {
			return exitFailure, err
		} else if tracer != 0 {
			return exitUsage, fmt.Errorf("pid %d is traced already by coldtrace (pid %d); mark that trace instead", pid, tracer)
		}
	}
	return 0, nil
}

// reachCgroup resolves the --cgroup directory with the rights of the user
// coldtrace acts for, before root looks at it: under sudo a path the user
// cannot reach fails alike whether or not it exists, so root's answer
// ("no such directory", "not a cgroup") never tells what a root-only
// directory holds. Root then works on the resolved path, with no symbolic
// link left to swap.
func reachCgroup(a actor.Actor, dir string) (string, error) {
	var resolved string
	err := a.Do(func() error {
		p, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%s: not a directory", p)
		}
		resolved = p
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("--cgroup %s: %w", dir, err)
	}
	return resolved, nil
}

func writeAttachOutputs(ctx context.Context, a actor.Actor, o attachOptions, jsonFD *os.File, stdout, stderr io.Writer, rec *record.Record) int {
	markReady(rec, o.ready, o.splitIdle.Nanoseconds())
	splitIdleMarks(rec, o.splitIdle.Nanoseconds())
	res := attribution.Analyze(rec)
	segs := attribution.Options{}.AnalyzeSegments(rec, attribution.Segments(rec, attribution.SegmentOptions{}))
	failed := false
	report := func(err error) {
		if err != nil {
			fmt.Fprintf(stderr, "coldtrace: error: %s\n", errorText(err))
			failed = true
		}
	}
	if o.changed["output"] {
		report(writeStdoutOr(a, o.recordPath, stdout, func(w io.Writer) error { return record.Encode(w, rec) }))
	}
	report(o.exports.write(a, stdout, rec, res))
	report(o.metrics.write(ctx, stderr, rec, res))
	if o.changed["json"] || jsonFD != nil {
		report(writeJSON(a, o.jsonPath, jsonFD, stdout, rec, res))
	}
	if !o.quiet {
		report(text.Write(stderr, rec, res, text.Options{TopFiles: o.topFiles}))
		if len(segs) > 1 {
			report(segments.WriteText(stderr, segs))
		}
	}
	if failed {
		return exitFailure
	}
	return 0
}

// markCommand is `coldtrace mark [--pid PID] LABEL`: cut the running
// trace at this moment.
func markCommand(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("coldtrace mark", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	pidArg := fs.String("pid", "", "mark the trace that follows `PID` (or whose coldtrace has that pid); needed when several run")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: coldtrace mark [--pid PID] LABEL\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return fail(stderr, exitUsage, fmt.Errorf("%w: %v", errUsage, err))
	}
	if fs.NArg() != 1 {
		return fail(stderr, exitUsage, fmt.Errorf("%w: mark takes one LABEL, got %d arguments", errUsage, fs.NArg()))
	}
	pid := 0
	if fs.Changed("pid") {
		var err error
		if pid, err = parsePID(*pidArg); err != nil {
			return fail(stderr, exitUsage, err)
		}
	}
	// Marks are checked against the user coldtrace acts for: under sudo
	// the mark goes out with that user's rights, to their traces only.
	a, err := actor.Resolve("", os.Getenv)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	mayMark := func(t marks.Trace) bool { return a.IsRoot() || t.Owner == a.UID }
	t, err := marks.Find(marks.Dir, pid, mayMark)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if err := a.Do(func() error { return marks.Send(t.Socket, fs.Arg(0)) }); err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EACCES) {
			return fail(stderr, exitFailure, fmt.Errorf("trace %d is %w", t.Tracer, marks.ErrNotYours))
		}
		return fail(stderr, exitFailure, err)
	}
	return 0
}
