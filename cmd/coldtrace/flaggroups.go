package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/trace"
)

// The flag groups of the commands that trace (run, attach): each group is
// registered by one function on a command's flag set, so a flag means the
// same, with the same default and help, wherever it is offered. The
// groups: trace outputs (traceOutputOptions, with exportOptions), sensors
// (sensorOptions), checkpoints (checkpointOptions), labels and metrics
// (metricsOptions).

// defaultTop is --top's default on every command that lists files: the
// default run, attach and report had (10); diff's and status's differ in
// what a row is, not in how many are shown.
const defaultTop = 10

// noJITEnv is the environment variable --no-jit replaces; it keeps
// working for one release, with a note on stderr.
const noJITEnv = "COLDTRACE_NO_JIT"

// traceOutputOptions are the files a tracing command writes: the record,
// the JSON summary (a path or an inherited descriptor), the exports, and
// the text summary on stderr.
type traceOutputOptions struct {
	jsonPath   string
	recordPath string
	// jsonFD is --json-fd: an inherited descriptor for the JSON summary.
	jsonFD   int
	quiet    bool
	topFiles int
	exports  exportOptions
}

// addFlags registers -o, --json, --json-fd, --pprof, --timeline, --top
// and --quiet on fs.
func (o *traceOutputOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.jsonPath, "json", "", "write the JSON summary to `PATH` ('-' for stdout)")
	fs.IntVar(&o.jsonFD, "json-fd", -1, "write the JSON summary to inherited descriptor `N` (e.g. --json-fd 3 3>summary.json)")
	fs.StringVarP(&o.recordPath, "output", "o", "", "write the full record to `PATH` (for report/diff)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "do not print the summary on stderr")
	fs.IntVar(&o.topFiles, "top", defaultTop, "files listed in the summary")
	o.exports.addFlags(fs)
}

// checkJSONTargets refuses --json and --json-fd together.
func checkJSONTargets(changed map[string]bool) error {
	if changed["json"] && changed["json-fd"] {
		return fmt.Errorf("%w: --json and --json-fd both name the JSON summary; give one", errUsage)
	}
	return nil
}

// sensorOptions choose the sensors of a trace and tune them.
type sensorOptions struct {
	noGPU       bool
	noJIT       bool
	noNetwork   bool
	noStacks    bool
	noReadExits bool
	gpuEvery    time.Duration
	cacheDirs   []string
	jitUprobes  []string
	jitSyscalls string
}

// addFlags registers --no-gpu, --no-jit, --no-network, --no-stacks,
// --no-read-exits, --gpu-interval,
// --cache-dir, --jit-uprobe and --jit-syscalls on fs.
func (o *sensorOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.noGPU, "no-gpu", false, "do not sample NVIDIA GPUs")
	fs.BoolVar(&o.noJIT, "no-jit", false, "do not trace compiles and kernel caches (replaces "+noJITEnv+"=1)")
	fs.BoolVar(&o.noNetwork, "no-network", false, "do not trace downloads")
	fs.BoolVar(&o.noStacks, "no-stacks", false, "do not take Python stacks")
	fs.BoolVar(&o.noReadExits, "no-read-exits", false, "where the kernel refuses task works to tracing programs (coldtrace doctor: fill ends), do not trace syscall exits from a run's first fill on, which puts every process of the machine on the syscall slow path until the run ends; a read's copy of its last pages is then not in its disk read")
	fs.DurationVar(&o.gpuEvery, "gpu-interval", 100*time.Millisecond, "GPU sampling period")
	fs.StringArrayVar(&o.cacheDirs, "cache-dir", nil, "extra kernel-cache directory `NAME=PATH` (repeatable)")
	fs.StringArrayVar(&o.jitUprobes, "jit-uprobe", nil, "time calls of `LIB:SYMBOL` as compiles (repeatable)")
	fs.StringVar(&o.jitSyscalls, "jit-syscalls", trace.JITSyscallsAuto, "when to trace the path syscalls kernel-cache hits and misses come from: `auto` (once a process uses a framework with a kernel cache, e.g. python, libcuda; from the start when the command is one) or always")
}

// check refuses a --jit-syscalls value other than auto or always.
func (o sensorOptions) check() error {
	if o.jitSyscalls != trace.JITSyscallsAuto && o.jitSyscalls != trace.JITSyscallsAlways {
		return fmt.Errorf("%w: --jit-syscalls %q: want auto or always", errUsage, o.jitSyscalls)
	}
	return nil
}

// apply sets the sensor fields of opts. The old environment variable
// still turns the JIT sensor off, with a note that says what replaces it.
func (o sensorOptions) apply(opts *trace.Options, getenv func(string) string, stderr io.Writer) {
	opts.NoGPU = o.noGPU
	fromEnv := noJITFromEnv(getenv, stderr) // said even beside --no-jit, so the variable gets dropped
	opts.NoJIT = o.noJIT || fromEnv
	opts.NoNetwork = o.noNetwork
	opts.NoStacks = o.noStacks
	opts.NoReadExits = o.noReadExits
	opts.GPUInterval = o.gpuEvery
	opts.CacheDirs = o.cacheDirs
	opts.JITUprobes = o.jitUprobes
	opts.JITSyscalls = o.jitSyscalls
}

// noJITFromEnv reports whether COLDTRACE_NO_JIT=1 asks for no JIT sensor,
// telling stderr that the variable is deprecated.
func noJITFromEnv(getenv func(string) string, stderr io.Writer) bool {
	if getenv(noJITEnv) != "1" {
		return false
	}
	fmt.Fprintf(stderr, "coldtrace: warning: %s=1 is deprecated and goes in the next release; use --no-jit\n", noJITEnv)
	return true
}

// parsePID reads one process id, as --pid takes it on attach and mark.
func parsePID(s string) (int, error) {
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%w: --pid %q: not a process id", errUsage, s)
	}
	return pid, nil
}

// parsePIDList reads --pid PID[,PID...]; empty fields are skipped.
func parsePIDList(list string) ([]int, error) {
	var pids []int
	for _, f := range strings.Split(list, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		pid, err := parsePID(f)
		if err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// documentOutput is -o of the commands that render (report, diff, merge,
// status, evict, prefetch): their document goes to stdout, or with -o to
// PATH, written atomically with the rights of the user coldtrace acts for.
type documentOutput struct {
	path string
	fs   *pflag.FlagSet
}

// addFlags registers -o, --output on fs.
func (d *documentOutput) addFlags(fs *pflag.FlagSet) {
	d.fs = fs
	fs.StringVarP(&d.path, "output", "o", "", "write to `PATH` instead of stdout")
}

// toFile says whether the document goes to a file: -o given, and not
// "-"; -o "" is an empty path (refused by check), never stdout.
func (d documentOutput) toFile() bool {
	return d.fs != nil && d.fs.Changed("output") && d.path != outfile.Stdout
}

// check refuses, before any work, a -o that could not be written.
func (d documentOutput) check(a actor.Actor) error {
	if !d.toFile() {
		return nil
	}
	return outfile.Check(a, outfile.Output{Flag: "-o", Path: d.path})
}

// write renders the document to stdout or the -o file.
func (d documentOutput) write(a actor.Actor, stdout io.Writer, render func(io.Writer) error) error {
	if !d.toFile() {
		return render(stdout)
	}
	return outfile.Write(a, d.path, render)
}

// writeDocument writes document as JSON with --json (asJSON), else its
// text, to stdout or the -o file.
func (d documentOutput) writeDocument(a actor.Actor, stdout io.Writer, asJSON bool, document any, text func(io.Writer) error) error {
	return d.write(a, stdout, func(w io.Writer) error {
		if asJSON {
			return encodeJSON(w, document)
		}
		return text(w)
	})
}
