package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/report/bench"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/trace/abrun"
)

type benchOptions struct {
	pairs                       int
	a, b, aFile, bFile          string
	coldWarm                    bool
	order                       string
	seed                        uint64
	warmup                      int
	prepare, prepareA, prepB    string
	keepGoing, sameOut, showOut bool
	expect                      string
	jsonPath, mdPath, plotPath  string
	busyCPU                     float64
	busyIOMiB                   float64
	noGPU                       bool
	noJIT, noNetwork            bool
	command                     []string
}

func parseBenchFlags(args []string, stderr io.Writer) (benchOptions, error) {
	var o benchOptions
	fs := newFlagSet("coldtrace bench", "usage: sudo coldtrace bench [flags] --a 'CMD…' --b 'CMD…'\n       sudo coldtrace bench [flags] --cold-warm -- CMD [ARGS…]\n\nflags:\n", stderr)
	fs.SetInterspersed(false)
	fs.IntVarP(&o.pairs, "pairs", "n", 5, "A/B pairs: the order is A B A B … A, so every B is bracketed")
	fs.StringVar(&o.a, "a", "", "command A, split into arguments without a shell ('…' and \"…\" quote)")
	fs.StringVar(&o.b, "b", "", "command B")
	fs.StringVar(&o.aFile, "a-file", "", "read command A from `FILE`, one argument per line")
	fs.StringVar(&o.bFile, "b-file", "", "read command B from `FILE`, one argument per line")
	fs.BoolVar(&o.coldWarm, "cold-warm", false, "A and B are the command after --: A cold as with run --cold (the files earlier runs read from disk evicted, JIT caches empty), B warm")
	fs.StringVar(&o.order, "order", "alternate", "run order: alternate (A B A B … A) or shuffle")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of --order shuffle (0: from the clock)")
	fs.IntVar(&o.warmup, "warmup", 0, "runs before the bench, not counted")
	fs.StringVar(&o.prepare, "prepare", "", "command run before every run (untraced, as the command's user)")
	fs.StringVar(&o.prepareA, "prepare-a", "", "command run before every A run")
	fs.StringVar(&o.prepB, "prepare-b", "", "command run before every B run")
	fs.BoolVar(&o.keepGoing, "keep-going", false, "go on after a run exits non-zero (it is not counted)")
	fs.BoolVar(&o.sameOut, "same-output", false, "fail when the runs' stdout differ")
	fs.BoolVar(&o.showOut, "show-output", false, "show each run's output (captured otherwise)")
	fs.StringVar(&o.expect, "expect", "", "`REGEX` each run's stdout or stderr must match (is the setting really on?)")
	fs.StringVar(&o.jsonPath, "json", "", "write the bench as JSON to `PATH` ('-' for stdout)")
	fs.StringVar(&o.mdPath, "markdown", "", "write the table and verdict as Markdown to `PATH` ('-' for stdout)")
	fs.StringVar(&o.plotPath, "plot", "", "write an SVG plot of the runs to `PATH`")
	fs.Float64Var(&o.busyCPU, "busy-cpu", 0.25, "flag runs during which other processes used this many CPUs on average")
	fs.Float64Var(&o.busyIOMiB, "busy-io", 20, "flag runs during which other processes did this many MiB/s of block I/O")
	fs.BoolVar(&o.noGPU, "no-gpu", false, "do not sample NVIDIA GPUs")
	fs.BoolVar(&o.noJIT, "no-jit", false, "do not trace compiles and kernel caches (replaces "+noJITEnv+"=1)")
	fs.BoolVar(&o.noNetwork, "no-network", false, "do not trace downloads")
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	o.command = fs.Args()
	// An output flag given an empty path is a mistake, not "no output".
	for _, name := range []string{"json", "markdown", "plot"} {
		if f := fs.Lookup(name); f.Changed && f.Value.String() == "" {
			return o, fmt.Errorf("%w: --%s: empty path (use - for stdout)", errUsage, name)
		}
	}
	switch {
	case o.pairs < 1:
		return o, fmt.Errorf("%w: -n %d: at least one pair", errUsage, o.pairs)
	case o.warmup < 0:
		return o, fmt.Errorf("%w: --warmup %d", errUsage, o.warmup)
	case o.order != "alternate" && o.order != "shuffle":
		return o, fmt.Errorf("%w: --order %q: want alternate or shuffle", errUsage, o.order)
	case o.coldWarm && (o.a != "" || o.b != "" || o.aFile != "" || o.bFile != ""):
		return o, fmt.Errorf("%w: --cold-warm takes the command after --, not --a/--b", errUsage)
	case o.coldWarm && len(o.command) == 0:
		return o, fmt.Errorf("%w: --cold-warm needs a command: coldtrace bench --cold-warm -- CMD", errUsage)
	case !o.coldWarm && len(o.command) > 0:
		return o, fmt.Errorf("%w: unexpected arguments %q: give the commands with --a and --b, or use --cold-warm -- CMD", errUsage, o.command)
	case !o.coldWarm && (o.a == "") == (o.aFile == ""):
		return o, fmt.Errorf("%w: give command A with exactly one of --a or --a-file", errUsage)
	case !o.coldWarm && (o.b == "") == (o.bFile == ""):
		return o, fmt.Errorf("%w: give command B with exactly one of --b or --b-file", errUsage)
	}
	return o, nil
}

// plan builds the bench plan, reading --a-file/--b-file with the acting
// user's rights.
func (o benchOptions) plan(a actor.Actor) (abtest.Plan, error) {
	p := abtest.Plan{Pairs: o.pairs, Warmup: o.warmup, Shuffle: o.order == "shuffle", Seed: o.seed,
		KeepGoing: o.keepGoing, SameOutput: o.sameOut, BusyCPU: o.busyCPU, BusyIO: o.busyIOMiB * (1 << 20)}
	if p.Shuffle && p.Seed == 0 {
		p.Seed = uint64(time.Now().UnixNano())
	}
	var err error
	if o.coldWarm {
		p.A = abtest.Command{Argv: o.command, Cold: true}
		p.B = abtest.Command{Argv: o.command}
	} else {
		if p.A.Argv, err = commandOf("A", o.a, o.aFile, a); err != nil {
			return p, err
		}
		if p.B.Argv, err = commandOf("B", o.b, o.bFile, a); err != nil {
			return p, err
		}
	}
	for _, x := range []struct {
		flag, line string
		dst        *[]string
	}{{"--prepare", o.prepare, &p.Prepare}, {"--prepare-a", o.prepareA, &p.A.Prepare}, {"--prepare-b", o.prepB, &p.B.Prepare}} {
		if x.line == "" {
			continue
		}
		if *x.dst, err = abrun.SplitArgs(x.line); err != nil {
			return p, fmt.Errorf("%w: %s: %v", errUsage, x.flag, err)
		}
		if len(*x.dst) == 0 {
			return p, fmt.Errorf("%w: %s is empty", errUsage, x.flag)
		}
	}
	if o.expect != "" {
		if p.Expect, err = regexp.Compile(o.expect); err != nil {
			return p, fmt.Errorf("%w: --expect: %v", errUsage, err)
		}
	}
	return p, nil
}

func commandOf(side, line, file string, a actor.Actor) ([]string, error) {
	var argv []string
	if file != "" {
		var b []byte
		err := a.Do(func() error {
			var err error
			b, err = os.ReadFile(file)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("command %s: %w", side, err)
		}
		argv = abrun.ArgsFromFile(string(b))
	} else {
		var err error
		if argv, err = abrun.SplitArgs(line); err != nil {
			return nil, fmt.Errorf("%w: --%s: %v", errUsage, strings.ToLower(side), err)
		}
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: command %s is empty", errUsage, side)
	}
	return argv, nil
}

func benchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseBenchFlags(args, stderr)
	if err != nil {
		return parseFailed(stderr, err)
	}
	a, err := actor.Resolve("", os.Getenv)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	plan, err := o.plan(a)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	if err := o.checkOutputs(a); err != nil {
		return fail(stderr, exitUsage, err)
	}

	sigs := catchSignals() // installed until exit: a late signal must not change the exit code
	tty := isTerminal(stderr)
	catchSIGPIPE()
	stderr = stopOnEPIPE(stderr)
	runner := abrun.New(abrun.Options{
		Version: version, Actor: a, Signals: sigs, NoGPU: o.noGPU,
		NoJIT: o.noJIT || noJITFromEnv(os.Getenv, stderr), NoNetwork: o.noNetwork,
		Notify: func(msg string) { fmt.Fprintf(stderr, "\rcoldtrace: %s\n", format.Escape(msg)) },
	})
	defer runner.Close()
	rep, err := abrun.Bench(ctx, runner, plan, benchProgress(tty, stderr), o.shownOutput(tty, stdout, stderr))
	if tty {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if rep == nil || len(rep.Runs) == 0 {
		if err == nil {
			err = errors.New("no run finished")
		}
		return fail(stderr, exitFailure, err)
	}
	if rep.Summary.Status == nil {
		// Stopped before judging: judge what there is.
		rep.Summary = abtest.Analyze(nil, abtest.Options{})
	}
	code := 0
	if err != nil {
		code = 1
		if !errors.Is(err, abrun.ErrStopped) {
			fmt.Fprintf(stderr, "coldtrace: error: %s\n", errorText(err))
			code = exitFailure
		}
	}
	return o.writeResults(a, rep, code, stdout, stderr)
}

// checkOutputs fails now, not after the bench, on an output that cannot
// be written.
func (o benchOptions) checkOutputs(a actor.Actor) error {
	var outs []outfile.Output
	for _, x := range []outfile.Output{{Flag: "--json", Path: o.jsonPath}, {Flag: "--markdown", Path: o.mdPath}, {Flag: "--plot", Path: o.plotPath}} {
		if x.Path != "" {
			outs = append(outs, x)
		}
	}
	if o.plotPath == outfile.Stdout {
		return fmt.Errorf("%w: --plot needs a file path", errUsage)
	}
	return outfile.Check(a, outs...)
}

// benchProgress is the live line on a terminal: nothing elsewhere.
func benchProgress(tty bool, stderr io.Writer) abrun.Progress {
	return func(i, n int, side abtest.Side, warmup bool, eta time.Duration) {
		if !tty {
			return
		}
		what := string(side)
		if warmup {
			what += ", warm-up"
		}
		line := fmt.Sprintf("coldtrace bench: run %d of %d (%s)", i, n, what)
		if eta > 0 {
			line += ", ETA " + eta.Round(time.Second).String()
		}
		fmt.Fprintf(stderr, "\r\033[K%s", line)
	}
}

// shownOutput passes each run's output on with --show-output.
func (o benchOptions) shownOutput(tty bool, stdout, stderr io.Writer) func(abtest.RunReport) {
	return func(rr abtest.RunReport) {
		if !o.showOut {
			return
		}
		if tty {
			fmt.Fprint(stderr, "\r\033[K")
		}
		fmt.Fprintf(stderr, "--- run %d (%s) output ---\n", rr.N, rr.Side)
		stdout.Write(rr.Stdout)
		stderr.Write(rr.Stderr)
	}
}

// writeResults prints the table and the verdict and writes the files
// asked for; it returns code, or exitFailure when one failed.
func (o benchOptions) writeResults(a actor.Actor, rep *abtest.Report, code int, stdout, stderr io.Writer) int {
	plan := rep.Plan
	fmt.Fprintf(stderr, "A: %s\nB: %s\n", format.EscapeAll(plan.A.Argv), format.EscapeAll(plan.B.Argv))
	if plan.A.Cold {
		fmt.Fprintln(stderr, "(A cold: the files earlier runs read from disk evicted, JIT caches pointed at empty directories; B warm)")
	}
	if werr := bench.Table(stderr, rep); werr != nil {
		return fail(stderr, exitFailure, werr)
	}
	if werr := bench.Summary(stderr, rep); werr != nil {
		return fail(stderr, exitFailure, werr)
	}
	writers := []struct {
		path  string
		write func(io.Writer) error
	}{
		{o.jsonPath, func(w io.Writer) error { return encodeJSON(w, bench.NewDocument(rep)) }},
		{o.mdPath, func(w io.Writer) error { return bench.Markdown(w, rep) }},
		{o.plotPath, func(w io.Writer) error { return bench.SVG(w, rep) }},
	}
	for _, x := range writers {
		if x.path == "" {
			continue
		}
		var werr error
		if x.path == outfile.Stdout {
			werr = x.write(stdout)
		} else {
			werr = outfile.Write(a, x.path, x.write)
		}
		if werr != nil {
			fmt.Fprintf(stderr, "coldtrace: error: %s\n", errorText(werr))
			code = exitFailure
		}
	}
	return code
}
