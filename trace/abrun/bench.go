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

	rep := &abtest.Report{Plan: p}
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
		rr := abtest.RunReport{N: n + 1, Side: st.side, Warmup: st.warmup}
		var env []string
		var cold *coldrun.Run
		if side.Cold {
			c, report, err := r.makeCold(filesRead)
			if err != nil {
				return rep, err
			}
			cold, rr.Cold, env = c, report, report.Env
		}
		before := r.Signals()
		res, err := r.Run(ctx, side.Argv, env)
		r.cleanup(cold)
		if err != nil && r.Signals() > before {
			rep.Stopped = fmt.Sprintf("interrupted (run %d: %v)", n+1, err)
			break
		}
		if err != nil {
			return rep, err
		}
		rr.Result = res
		for _, f := range filesFromDisk(res.Record) {
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
	rep.Judge()
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
