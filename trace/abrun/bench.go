package abrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"time"

	"github.com/coldtrace/coldtrace/attribution/abtest"
)

// Side is one of the two commands.
type Side struct {
	Argv []string `json:"argv"`
	// Prepare runs before each of this side's runs (after the common one).
	Prepare []string `json:"prepare,omitempty"`
	// Cold: before each run, evict the files every earlier run read and
	// point JIT caches at fresh directories.
	Cold bool `json:"cold,omitempty"`
}

// Plan is a whole bench.
type Plan struct {
	A, B    Side
	Pairs   int
	Warmup  int
	Shuffle bool
	Seed    uint64
	// Prepare runs before every run, warm-ups included.
	Prepare    []string
	KeepGoing  bool
	SameOutput bool
	Expect     *regexp.Regexp
	// BusyCPU (CPUs) and BusyIO (bytes/s) are the interference
	// thresholds: a run whose other processes used more, on average, is
	// flagged.
	BusyCPU float64
	BusyIO  float64
}

// Order is the run order of the counted runs: A B A B … A (every B
// between two As), or with shuffle the same runs in a random order that
// still starts and ends with an A.
func (p Plan) Order() []abtest.Side {
	var out []abtest.Side
	for i := 0; i < p.Pairs; i++ {
		out = append(out, abtest.A, abtest.B)
	}
	out = append(out, abtest.A)
	if p.Shuffle && len(out) > 2 {
		r := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
		mid := out[1 : len(out)-1]
		r.Shuffle(len(mid), func(i, j int) { mid[i], mid[j] = mid[j], mid[i] })
	}
	return out
}

// RunReport is one run of the bench, warm-ups included.
type RunReport struct {
	// N counts every run from 1; Index counts the counted runs from 1
	// (0 for a warm-up).
	N          int           `json:"n"`
	Index      int           `json:"index,omitempty"`
	Side       abtest.Side   `json:"side"`
	Warmup     bool          `json:"warmup,omitempty"`
	Status     abtest.Status `json:"status,omitempty"`
	Interfered bool          `json:"interfered,omitempty"`
	Cold       *Cold         `json:"cold,omitempty"`
	ExpectMiss bool          `json:"expect_missed,omitempty"`
	*Result
}

// Report is a finished (or stopped) bench.
type Report struct {
	Plan    Plan           `json:"-"`
	Runs    []RunReport    `json:"runs"`
	Summary abtest.Summary `json:"summary"`
	// OutputsDiffer is set when the counted runs' stdout hashes differ.
	OutputsDiffer bool `json:"outputs_differ"`
	// Stopped says why the bench ended early; empty when it ran through.
	Stopped string `json:"stopped,omitempty"`
}

// Progress is told before each run: run i of n, the time left by the
// mean run so far (0 before the first).
type Progress func(i, n int, side abtest.Side, warmup bool, eta time.Duration)

// ErrStopped wraps the reason a bench stopped early (a failed run, an
// --expect that did not match, different outputs with --same-output).
var ErrStopped = errors.New("bench stopped")

// Bench runs the plan. It returns the report so far with an error
// wrapping ErrStopped when a guard rail stopped it, or another error
// when tracing failed.
func Bench(ctx context.Context, r *Runner, p Plan, progress Progress, shown func(RunReport)) (*Report, error) {
	if progress == nil {
		progress = func(int, int, abtest.Side, bool, time.Duration) {}
	}
	if shown == nil {
		shown = func(RunReport) {}
	}
	order := p.Order()
	warm := p.Warmup
	if (p.A.Cold || p.B.Cold) && warm == 0 {
		// A cold run evicts what earlier runs read: one run must show it.
		warm = 1
	}
	type step struct {
		side   abtest.Side
		warmup bool
	}
	var steps []step
	for i := 0; i < warm; i++ {
		// Warm-ups alternate B, A, …, ending next to the first counted A
		// with a B, so a cold A still finds the files read.
		side := abtest.B
		if (warm-i)%2 == 0 {
			side = abtest.A
		}
		steps = append(steps, step{side, true})
	}
	for _, s := range order {
		steps = append(steps, step{s, false})
	}

	rep := &Report{Plan: p}
	// The shim is coldtrace's own executable: never evict it.
	self, _ := os.Executable()
	var filesRead []string
	seen := map[string]bool{}
	began := time.Now()
	counted := 0
	for n, st := range steps {
		var eta time.Duration
		if n > 0 {
			eta = time.Since(began) / time.Duration(n) * time.Duration(len(steps)-n)
		}
		if sig := r.pendingSignal(); sig != nil {
			// A signal between two runs: stop here rather than hand it
			// to the next command as soon as it starts.
			rep.Stopped = fmt.Sprintf("interrupted (%v before run %d)", sig, n+1)
			break
		}
		progress(n+1, len(steps), st.side, st.warmup, eta)
		side := p.A
		if st.side == abtest.B {
			side = p.B
		}
		for _, prep := range [][]string{p.Prepare, side.Prepare} {
			if len(prep) == 0 {
				continue
			}
			if _, err := r.Prepare(ctx, prep); err != nil {
				return rep, err
			}
		}
		rr := RunReport{N: n + 1, Side: st.side, Warmup: st.warmup}
		var env []string
		if side.Cold {
			c, err := r.MakeCold(filesRead)
			if err != nil {
				return rep, err
			}
			rr.Cold, env = c, c.Env
		}
		before := r.Signals()
		res, err := r.Run(ctx, side.Argv, env)
		rr.Cold.Cleanup()
		if err != nil && r.Signals() > before {
			rep.Stopped = fmt.Sprintf("interrupted (run %d: %v)", n+1, err)
			break
		}
		if err != nil {
			return rep, err
		}
		rr.Result = res
		for _, f := range FilesRead(res.Record) {
			if !seen[f] && f != self {
				seen[f] = true
				filesRead = append(filesRead, f)
			}
		}
		rr.Interfered = res.Interference.CPUMean >= p.BusyCPU || (p.BusyIO > 0 && res.Interference.IORate >= p.BusyIO) ||
			gpuBusy(res.Interference)
		if !st.warmup {
			counted++
			rr.Index = counted
		}
		if p.Expect != nil && !res.Matches(p.Expect) {
			rr.ExpectMiss = true
		}
		rep.Runs = append(rep.Runs, rr)
		shown(rr)
		switch {
		case res.Record.Interrupted || res.Record.Signal == "SIGINT" || res.Record.Signal == "SIGTERM":
			// On a terminal the command has the foreground and takes
			// Ctrl-C itself: that ends the bench, --keep-going or not.
			rep.Stopped = fmt.Sprintf("interrupted (run %d ended by %s)", n+1, or(res.Record.Signal, "a signal"))
		case res.ExitCode != 0 && !p.KeepGoing:
			rep.Stopped = fmt.Sprintf("run %d (%s) exited %d (--keep-going goes on)", n+1, st.side, res.ExitCode)
		case rr.ExpectMiss:
			rep.Stopped = fmt.Sprintf("run %d (%s): neither stdout nor stderr matches --expect %q", n+1, st.side, p.Expect.String())
		}
		if rep.Stopped != "" {
			break
		}
	}
	rep.judge()
	if rep.Stopped == "" && p.SameOutput && rep.OutputsDiffer {
		rep.Stopped = "the runs' outputs differ (--same-output)"
	}
	if rep.Stopped != "" {
		return rep, fmt.Errorf("%w: %s", ErrStopped, rep.Stopped)
	}
	return rep, nil
}

// pendingSignal takes a signal that arrived while no run was going on.
func (r *Runner) pendingSignal() os.Signal {
	select {
	case sig := <-r.signals:
		return sig
	default:
		return nil
	}
}

func gpuBusy(in Interference) bool {
	for _, g := range in.GPUOthers {
		if g.CPUs > 0.05 {
			return true
		}
	}
	return false
}

// judge runs the statistics over the counted runs and records each run's
// status.
func (rep *Report) judge() {
	var runs []abtest.Run
	var idx []int
	hashes := map[string]bool{}
	for i, rr := range rep.Runs {
		if rr.Warmup {
			continue
		}
		runs = append(runs, abtest.Run{
			Side: rr.Side, WallNS: rr.WallNS, SysNS: rr.SysNS, Split: rr.Split,
			Failed: rr.ExitCode != 0, Interfered: rr.Interfered,
		})
		idx = append(idx, i)
		if rr.ExitCode == 0 {
			hashes[rr.StdoutSHA256] = true
		}
	}
	rep.Summary = abtest.Analyze(runs, abtest.Options{})
	for k, i := range idx {
		rep.Runs[i].Status = rep.Summary.Status[k]
	}
	// The seed's check: both sides must print the same thing.
	rep.OutputsDiffer = len(hashes) > 1
}

func or(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
