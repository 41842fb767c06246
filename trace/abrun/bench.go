package abrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/residency/coldrun"
)

// Progress is told before each run: run i of n, the time left by the
// mean run so far (0 before the first).
type Progress func(i, n int, side abtest.Side, warmup bool, eta time.Duration)

// ErrStopped wraps the reason a bench stopped early (a failed run, an
// --expect that did not match, different outputs with --same-output).
var ErrStopped = errors.New("bench stopped")

// Bench runs the plan. It returns the report so far with an error
// wrapping ErrStopped when a guard rail stopped it, or another error
// when tracing failed.
func Bench(ctx context.Context, r *Runner, p abtest.Plan, progress Progress, shown func(abtest.RunReport)) (*abtest.Report, error) {
	if progress == nil {
		progress = func(int, int, abtest.Side, bool, time.Duration) {}
	}
	if shown == nil {
		shown = func(abtest.RunReport) {}
	}
	steps := stepsOf(p)
	rep := &abtest.Report{Plan: p}
	b := bench{r: r, p: p, seen: map[string]bool{}}
	// The shim is coldtrace's own executable: never evict it.
	b.self, _ = os.Executable()
	began := time.Now()
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
		rr, stopped, err := b.run(ctx, n, st)
		if err != nil {
			return rep, err
		}
		if rr != nil {
			rep.Runs = append(rep.Runs, *rr)
			shown(*rr)
		}
		if rep.Stopped = stopped; stopped != "" {
			break
		}
	}
	rep.Judge()
	if rep.Stopped == "" && p.SameOutput && rep.OutputsDiffer {
		rep.Stopped = "the runs' outputs differ (--same-output)"
	}
	if rep.Stopped != "" {
		return rep, fmt.Errorf("%w: %s", ErrStopped, rep.Stopped)
	}
	return rep, nil
}

// step is one run of a bench: its side, and whether it is a warm-up.
type step struct {
	side   abtest.Side
	warmup bool
}

// stepsOf is the plan's warm-ups, then its counted runs.
func stepsOf(p abtest.Plan) []step {
	warm := p.Warmup
	if (p.A.Cold || p.B.Cold) && warm == 0 {
		// A cold run evicts what earlier runs read: one run must show it.
		warm = 1
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
	for _, s := range p.Order() {
		steps = append(steps, step{s, false})
	}
	return steps
}

// bench is one bench under way: the files earlier runs read from disk,
// for the cold runs to evict, and the counted runs so far.
type bench struct {
	r         *Runner
	p         abtest.Plan
	self      string
	filesRead []string
	seen      map[string]bool
	counted   int
}

// run prepares and runs step n. stopped says why the bench ends after
// it ("" to go on); the report is nil when a signal ended the run
// before it finished.
func (b *bench) run(ctx context.Context, n int, st step) (rr *abtest.RunReport, stopped string, err error) {
	side := b.p.A
	if st.side == abtest.B {
		side = b.p.B
	}
	for _, prep := range [][]string{b.p.Prepare, side.Prepare} {
		if len(prep) == 0 {
			continue
		}
		if _, err := b.r.Prepare(ctx, prep); err != nil {
			return nil, "", err
		}
	}
	rr = &abtest.RunReport{N: n + 1, Side: st.side, Warmup: st.warmup}
	var env []string
	var cold *coldrun.Run
	if side.Cold {
		c, report, err := b.r.makeCold(b.filesRead)
		if err != nil {
			return nil, "", err
		}
		cold, rr.Cold, env = c, report, report.Env
	}
	before := b.r.Signals()
	res, err := b.r.Run(ctx, side.Argv, env)
	b.r.cleanup(cold)
	if err != nil && b.r.Signals() > before {
		return nil, fmt.Sprintf("interrupted (run %d: %v)", n+1, err), nil
	}
	if err != nil {
		return nil, "", err
	}
	rr.Result = res
	for _, f := range filesFromDisk(res.Record) {
		if !b.seen[f] && f != b.self {
			b.seen[f] = true
			b.filesRead = append(b.filesRead, f)
		}
	}
	rr.Interfered = res.Interference.CPUMean >= b.p.BusyCPU || (b.p.BusyIO > 0 && res.Interference.IORate >= b.p.BusyIO) ||
		gpuBusy(res.Interference)
	if !st.warmup {
		b.counted++
		rr.Index = b.counted
	}
	rr.ExpectMiss = b.p.Expect != nil && !res.Matches(b.p.Expect)
	return rr, b.stopAfter(n, st, rr), nil
}

// stopAfter says why the bench stops after run n, or "".
func (b *bench) stopAfter(n int, st step, rr *abtest.RunReport) string {
	switch rec := rr.Record; {
	case rec.Interrupted || rec.Signal == "SIGINT" || rec.Signal == "SIGTERM":
		// On a terminal the command has the foreground and takes
		// Ctrl-C itself: that ends the bench, --keep-going or not.
		return fmt.Sprintf("interrupted (run %d ended by %s)", n+1, or(rec.Signal, "a signal"))
	case rr.ExitCode != 0 && !b.p.KeepGoing:
		return fmt.Sprintf("run %d (%s) exited %d (--keep-going goes on)", n+1, st.side, rr.ExitCode)
	case rr.ExpectMiss:
		return fmt.Sprintf("run %d (%s): neither stdout nor stderr matches --expect %q", n+1, st.side, b.p.Expect.String())
	}
	return ""
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

func gpuBusy(in abtest.Interference) bool {
	for _, g := range in.GPUOthers {
		if g.CPUs > 0.05 {
			return true
		}
	}
	return false
}

func or(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
