package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/summary"
	"github.com/coldtrace/coldtrace/report/text"
	"github.com/coldtrace/coldtrace/trace"
)

// beforeOutputs, when set, runs between the command's exit and the
// writing of the outputs: a test holds coldtrace there to signal it.
var beforeOutputs func()

type runOptions struct {
	jsonPath    string
	recordPath  string
	interval    time.Duration
	user        string
	quiet       bool
	topFiles    int
	noGPU       bool
	gpuEvery    time.Duration
	cacheDirs   []string
	jitUprobes  []string
	jitSyscalls string
	exports     exportOptions
	metrics     metricsOptions
	command     []string
}

func parseRunFlags(args []string, stderr io.Writer) (runOptions, error) {
	var o runOptions
	fs := pflag.NewFlagSet("coldtrace run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SetInterspersed(false) // the command's own flags are not ours
	fs.StringVar(&o.jsonPath, "json", "", "write the JSON summary to `PATH` ('-' for stdout)")
	fs.StringVarP(&o.recordPath, "output", "o", "", "write the full run record to `PATH` (for report/diff)")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "timeline sampling period")
	fs.StringVar(&o.user, "user", "", "run the command as `NAME` (default: the user who ran sudo)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "do not print the summary on stderr")
	fs.IntVar(&o.topFiles, "top", 10, "files listed in the summary")
	fs.BoolVar(&o.noGPU, "no-gpu", false, "do not sample NVIDIA GPUs")
	fs.DurationVar(&o.gpuEvery, "gpu-interval", 100*time.Millisecond, "GPU sampling period")
	fs.StringArrayVar(&o.cacheDirs, "cache-dir", nil, "extra kernel-cache directory `NAME=PATH` (repeatable)")
	fs.StringArrayVar(&o.jitUprobes, "jit-uprobe", nil, "time calls of `LIB:SYMBOL` as compiles (repeatable)")
	fs.StringVar(&o.jitSyscalls, "jit-syscalls", trace.JITSyscallsAuto, "when to trace the path syscalls kernel-cache hits and misses come from: `auto` (once a process uses a framework with a kernel cache, e.g. python, libcuda; from the start when the command is one) or always")
	o.exports.addFlags(fs)
	o.metrics.addFlags(fs)
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
	if o.jitSyscalls != trace.JITSyscallsAuto && o.jitSyscalls != trace.JITSyscallsAlways {
		return o, fmt.Errorf("%w: --jit-syscalls %q: want auto or always", errUsage, o.jitSyscalls)
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
	o, err := parseRunFlags(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	// An unwritable output path must fail now, not after an hour's run.
	for _, p := range []string{o.jsonPath, o.recordPath} {
		if p != "" && p != "-" {
			if err := record.CheckWritable(p); err != nil {
				return fail(stderr, exitUsage, err)
			}
		}
	}
	if err := o.exports.check(); err != nil {
		return fail(stderr, exitUsage, err)
	}
	if err := o.metrics.check(o.user); err != nil {
		return fail(stderr, exitUsage, err)
	}

	// Signals are cmd's from here on: during the run they go to the
	// command (trace.Options.Signals); once it has exited they are caught
	// and dropped, so writing the outputs is not interrupted.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	rec, err := trace.Run(ctx, trace.Options{
		Command:     o.command,
		Interval:    o.interval,
		User:        o.user,
		Launched:    launched,
		Version:     version,
		Signals:     sigs,
		Notify:      func(msg string) { fmt.Fprintf(stderr, "coldtrace: %s\n", msg) },
		NoGPU:       o.noGPU,
		NoJIT:       os.Getenv("COLDTRACE_NO_JIT") == "1", // README: turns the JIT tracing off
		GPUInterval: o.gpuEvery,
		CacheDirs:   o.cacheDirs,
		JITUprobes:  o.jitUprobes,
		JITSyscalls: o.jitSyscalls,
	})
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if rec.StartError != "" {
		fmt.Fprintf(stderr, "coldtrace: cannot run %s\n", rec.StartError)
	}
	rec.Labels = o.metrics.labels
	if beforeOutputs != nil {
		beforeOutputs()
	}

	res := attribution.Analyze(rec)
	failed := false
	if o.recordPath != "" {
		if err := record.WriteFile(o.recordPath, rec); err != nil {
			fmt.Fprintf(stderr, "coldtrace: error: %v\n", err)
			failed = true
		}
	}
	if err := o.exports.write(rec, res); err != nil {
		fmt.Fprintf(stderr, "coldtrace: error: %v\n", err)
		failed = true
	}
	if err := o.metrics.write(ctx, stderr, rec, res); err != nil {
		fmt.Fprintf(stderr, "coldtrace: error: %v\n", err)
		failed = true
	}
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, stdout, rec, res); err != nil {
			fmt.Fprintf(stderr, "coldtrace: error: %v\n", err)
			failed = true
		}
	}
	if !o.quiet {
		if err := text.Write(stderr, rec, res, text.Options{TopFiles: o.topFiles}); err != nil {
			fmt.Fprintf(stderr, "coldtrace: error: write the summary: %v\n", err)
			failed = true
		}
	}
	if failed && rec.ExitCode == 0 {
		return exitFailure
	}
	return rec.ExitCode
}

func writeJSON(path string, stdout io.Writer, rec *record.Record, res *attribution.Result) error {
	if path == "-" {
		return summary.Write(stdout, rec, res)
	}
	return record.WriteFileAtomic(path, func(w io.Writer) error { return summary.Write(w, rec, res) })
}

func reportCommand(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("coldtrace report", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the JSON summary instead of text")
	top := fs.Int("top", 10, "files listed in the text summary")
	format := fs.String("format", "text", "output `FORMAT`: text, json, pprof or perfetto")
	out := fs.StringP("output", "o", "", "write to `PATH` instead of stdout")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: coldtrace report [flags] RECORD\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return fail(stderr, exitUsage, err)
	}
	if fs.NArg() != 1 {
		return fail(stderr, exitUsage, fmt.Errorf("report takes one record file, got %d arguments", fs.NArg()))
	}
	f, err := reportFormat(*format, *asJSON)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	rec, err := record.ReadFile(fs.Arg(0))
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if err := writeReport(*out, f, stdout, rec, nil, *top); err != nil {
		return fail(stderr, exitFailure, err)
	}
	return 0
}
