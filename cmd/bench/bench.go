package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// results is the JSON document of -json.
type results struct {
	Schema    string    `json:"schema"`
	Date      time.Time `json:"date"`
	Kernel    string    `json:"kernel"`
	CPUs      int       `json:"cpus"`
	Coldtrace string    `json:"coldtrace"`
	MaxBg     float64   `json:"max_bg"`
	Smoke     bool      `json:"smoke"`
	Pairs     int       `json:"pairs"`
	MaxPairs  int       `json:"max_pairs"`
	Warmup    int       `json:"warmup"`
	DelayNS   int64     `json:"delay_ns"`
	SettleNS  int64     `json:"settle_ns"`
	// SettleWarmNS is the wait before runs of warm workloads.
	SettleWarmNS int64      `json:"settle_warm_ns"`
	Workloads    []*summary `json:"workloads"`
	// FloorPrograms is how many empty programs the floor runs (-floor)
	// attached: one per program coldtrace attaches to a tracepoint.
	FloorPrograms int `json:"floor_programs,omitempty"`
	// Collateral is what untraced processes pay while coldtrace runs.
	Collateral *collateralResult `json:"collateral,omitempty"`
	Misses     []string          `json:"misses"`
	// Verdict is the one-line answer: every budget met, or how many were
	// missed and which.
	Verdict string `json:"verdict"`
}

// verdict is the results' one-line answer.
func (res *results) verdict() string {
	switch {
	case res.Smoke:
		return "smoke run, budgets not checked"
	case len(res.Misses) == 0:
		return fmt.Sprintf("every budget met (%d workloads)", len(res.Workloads))
	}
	return fmt.Sprintf("%d budget(s) missed: %s", len(res.Misses), strings.Join(res.Misses, "; "))
}

// overheadSchema names the results document of the overhead harness
// (make bench), apart from `coldtrace bench`'s A/B document.
const overheadSchema = "coldtrace.overhead/v1"

func benchmark(o options, stdout, stderr io.Writer) (*results, error) {
	log := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	ct, err := filepath.Abs(o.coldtrace)
	if err == nil {
		_, err = os.Stat(ct)
	}
	if err != nil {
		return nil, fmt.Errorf("coldtrace binary %s: %v (run make build)", o.coldtrace, err)
	}
	o.coldtrace = ct
	src := o.src
	if src == "" {
		if src, err = findSrc(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(o.dir, "coldtrace-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	work, ws, err := setup(o, dir, src, log)
	if err != nil {
		return nil, err
	}
	res := &results{Schema: overheadSchema, Date: time.Now().UTC(), Kernel: kernel(), CPUs: runtime.NumCPU(),
		Coldtrace: ct, MaxBg: o.maxBg, Smoke: o.smoke, Pairs: o.pairs, MaxPairs: o.maxPairs, Warmup: o.warmup, DelayNS: o.delay.Nanoseconds(),
		SettleNS: o.settle.Nanoseconds(), SettleWarmNS: o.settleWarm.Nanoseconds()}
	r := newRunner(o, work, dir)
	if o.floor {
		if r.floor, err = loadFloor(); err != nil {
			return nil, fmt.Errorf("-floor: %w", err)
		}
		defer r.floor.close()
		res.FloorPrograms = len(r.floor.progs)
	}
	begin := time.Now()
	for _, w := range ws {
		log("%s: %s (%d warm-up, %d pairs)", w.Name, w.Title, o.warmup, o.pairs)
		for i := 0; i < o.warmup; i++ {
			if _, err := r.runOnce(w, "W", i, nil); err != nil {
				return nil, fmt.Errorf("%s warm-up: %w", w.Name, err)
			}
		}
		runs, retried, err := measurePairs(r, w, o)
		if err != nil {
			return nil, err
		}
		s := summarize(w, runs)
		s.Warnings = append(retried, s.Warnings...)
		if !o.smoke {
			s.checkBudgets()
		}
		if o.bpfStats == "all" || o.bpfStats == "auto" && len(s.Misses) > 0 {
			if err := bpfPass(r, s); err != nil {
				s.Warnings = append(s.Warnings, fmt.Sprintf("BPF statistics pass: %v", err))
			}
		}
		res.Workloads = append(res.Workloads, s)
		res.Misses = append(res.Misses, s.Misses...)
		log("%s: median ratio %.3f (90%% interval %.3f–%.3f, %d pairs), untraced %v", w.Name, s.RatioMedian, s.RatioLo, s.RatioHi,
			len(s.Ratios), time.Duration(s.UntracedMedianNS).Round(time.Millisecond))
		if len(s.FloorRatios) > 0 {
			log("%s: floor %.3f (90%% interval %.3f–%.3f)", w.Name, s.FloorMedian, s.FloorLo, s.FloorHi)
		}
	}
	relativeBudgets(res)
	if wantCollateral(o) {
		if res.Collateral, err = runCollateral(o, dir, src, log); err != nil {
			return nil, err
		}
		res.Misses = append(res.Misses, res.Collateral.Misses...)
	}
	res.Verdict = res.verdict()
	if len(res.Workloads) > 0 {
		printTable(stdout, res, time.Since(begin))
	}
	if res.Collateral != nil {
		res.Collateral.print(stdout)
	}
	return res, nil
}

// measurePairs runs w's pairs, U T U T … U: -pairs of them, then more,
// up to -max-pairs, while the 90% interval of the median ratio holds
// w's budget. Each added pair is a traced run and a closing untraced
// one, so every traced run keeps an untraced neighbour on each side.
// With -floor each pair holds a floor run too, after the traced run in
// odd pairs and before it in even ones: U T F U F T U …
func measurePairs(r *runner, w *workload, o options) ([]runResult, []string, error) {
	var runs []runResult
	var retried []string
	add := func(kind string, index int) error {
		rr, err := r.runRetry(w, kind, index, &retried)
		if err != nil {
			return fmt.Errorf("%s %s%d: %w", w.Name, kind, index, err)
		}
		runs = append(runs, rr)
		return nil
	}
	if err := add("U", 0); err != nil {
		return nil, nil, err
	}
	for pairs := 1; ; pairs++ {
		order := []string{"T"}
		if o.floor {
			order = []string{"T", "F"}
			if pairs%2 == 0 {
				order = []string{"F", "T"}
			}
		}
		for _, kind := range order {
			if err := add(kind, pairs-1); err != nil {
				return nil, nil, err
			}
		}
		if err := add("U", pairs); err != nil {
			return nil, nil, err
		}
		if pairs < o.pairs {
			continue
		}
		if pairs >= o.maxPairs || decided(bracketRatios(runs), w.Budget) {
			return runs, retried, nil
		}
	}
}

// runRetry runs w once, and again (twice at most) when the run fails:
// others share this machine, and a probe can fail to attach for a moment.
// A run during which other processes used more than -max-bg of the CPUs
// is repeated too, -redos times at most. Each repeat is noted in *notes.
func (r *runner) runRetry(w *workload, kind string, index int, notes *[]string) (runResult, error) {
	fails, redos := 0, 0
	for {
		rr, err := r.runOnce(w, kind, index, nil)
		if err != nil {
			if fails++; fails > 2 {
				return rr, err
			}
			msg := strings.TrimSpace(err.Error())
			if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
				msg = msg[i+1:]
			}
			*notes = append(*notes, fmt.Sprintf("run %s%d failed and was repeated: %s", kind, index, msg))
			continue
		}
		if rr.BgCPU > r.o.maxBg && redos < r.o.redos {
			redos++
			*notes = append(*notes, fmt.Sprintf("run %s%d repeated: other processes used %.0f%% of the CPUs", kind, index, 100*rr.BgCPU))
			continue
		}
		// A cold read that took far more CPU than the same read at best
		// met memory the host had taken back (see touchMemory): its time
		// is the VM's, not the tracer's. Traced or not alike.
		if w.Cold && rr.WorkCPUNS > 0 {
			floor, ok := r.cpuFloor[w.Name]
			if !ok || rr.WorkCPUNS < floor {
				r.cpuFloor[w.Name] = rr.WorkCPUNS
			} else if rr.WorkCPUNS > floor*3/2 && redos < r.o.redos {
				redos++
				*notes = append(*notes, fmt.Sprintf("run %s%d repeated: the workload took %.1f× the least CPU time of this cold read (the VM faulting memory back in from the host)",
					kind, index, float64(rr.WorkCPUNS)/float64(floor)))
				continue
			}
		}
		return rr, nil
	}
}

// bpfPass runs w once more, traced with BPF statistics on, and keeps the
// per-program costs. Statistics slow every program down, so this run's
// wall time is not part of the ratios.
func bpfPass(r *runner, s *summary) error {
	c, err := newProgCapture()
	if err != nil {
		return err
	}
	defer c.close()
	rr, err := r.runOnce(s.workload, "S", 0, c)
	if err != nil {
		return err
	}
	s.BPF = c.results(rr.WallNS)
	s.BPFWallNS = rr.WallNS
	if r.o.profDir != "" {
		p := filepath.Join(r.o.profDir, "coldtrace-"+s.Name+".pprof")
		if _, err := os.Stat(p); err == nil {
			s.Profile = p
		} else {
			s.Warnings = append(s.Warnings, "coldtrace wrote no CPU profile (does it read COLDTRACE_CPUPROFILE?)")
		}
	}
	if len(s.BPF) == 0 {
		return fmt.Errorf("found no BPF programs in coldtrace's descriptors")
	}
	return nil
}

func printTable(w io.Writer, res *results, took time.Duration) {
	fmt.Fprintf(w, "\ncoldtrace overhead: kernel %s, %d CPUs, %d pair(s) U T … U, delay %v, settle %v (warm workloads %v), took %v\n",
		res.Kernel, res.CPUs, res.Pairs, time.Duration(res.DelayNS), time.Duration(res.SettleNS), time.Duration(res.SettleWarmNS), took.Round(time.Second))
	fmt.Fprintln(w, "ratio = traced wall / mean of the untraced runs either side (the workload's own clock), median over the pairs with its")
	fmt.Fprintln(w, "90% bootstrap interval; a budget is met when the whole interval is within it; drift = last untraced vs first")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tuntraced\tratio\t90% interval\tpairs\tbudget\tdrift\tspread\tbg cpu\tstartup\tlaunch+\tct cpu\tpeak RSS\tevents\tpy walks\treuses\tlost\t")
	for _, s := range res.Workloads {
		verdict := fmt.Sprintf("≤%.2f", s.Budget)
		if !res.Smoke {
			verdict += " " + map[string]string{judgedMet: "ok", judgedMissed: "MISS", judgedUndecided: "UNDECIDED"}[s.Judged]
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f–%.3f\t%d\t%s\t%+.1f%%\t%.1f%%\t%.0f%%\t%s\t%s\t%s\t%.1f MiB\t%d\t%d\t%d\t%d\t\n",
			s.Name, ms(s.UntracedMedianNS), s.RatioMedian, s.RatioLo, s.RatioHi, len(s.Ratios), verdict, s.DriftPct, s.SpreadPct,
			100*s.BgCPUMedian, ms(s.StartupMedianNS), ms(s.LaunchExtraNS), ms(s.CPUMedianNS),
			float64(s.MaxRSSBytes)/(1<<20), s.EventsSeenMedian, s.PyWalksMedian, s.PyReusesMedian, s.LostEvents)
	}
	tw.Flush()
	fmt.Fprintln(w, "startup: coldtrace's startup_ns (median); launch+: extra spawn→main() of traced runs, seen from outside;")
	fmt.Fprintln(w, "ct cpu: coldtrace's own CPU time; bg cpu: other processes' share of both CPUs during the runs")
	printFloors(w, res)
	fmt.Fprintln(w, "wall times in run order (ms):")
	for _, s := range res.Workloads {
		var b strings.Builder
		for _, r := range s.Runs {
			fmt.Fprintf(&b, " %s %.1f", r.Kind, float64(r.WallNS)/1e6)
		}
		fmt.Fprintf(w, "  %s:%s\n", s.Name, b.String())
	}
	for _, s := range res.Workloads {
		var u, t [3][]int64
		for _, r := range s.Runs {
			for i, p := range r.PhasesNS {
				if i < 3 && r.Kind == "U" {
					u[i] = append(u[i], p)
				} else if i < 3 && r.Kind == "T" {
					t[i] = append(t[i], p)
				}
			}
		}
		if len(u[0]) > 0 && len(t[0]) > 0 {
			fmt.Fprintf(w, "%s phases, median untraced → traced: sleep %s → %s, read %s → %s, spin %s → %s\n", s.Name,
				ms(median(u[0])), ms(median(t[0])), ms(median(u[1])), ms(median(t[1])), ms(median(u[2])), ms(median(t[2])))
		}
		if s.SwitchRateMedian > 0 {
			fmt.Fprintf(w, "%s: untraced %.0fk context switches/s\n", s.Name, s.SwitchRateMedian/1e3)
		}
		for _, m := range s.Warnings {
			fmt.Fprintf(w, "warning: %s: %s\n", s.Name, m)
		}
	}
	for _, s := range res.Workloads {
		if len(s.BPF) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nBPF programs during one traced %s run (statistics on; workload wall %s):\n", s.Name, ms(s.BPFWallNS))
		if s.Profile != "" {
			fmt.Fprintf(w, "coldtrace's CPU profile of that run: go tool pprof -top %s %s\n", res.Coldtrace, s.Profile)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "program\truns\tns/run\ttotal\tof wall\trecursion misses\t")
		for _, p := range s.BPF {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.2f%%\t%d\t\n", p.Name, p.Runs, p.NSPerRun, ms(int64(p.RunTimeNS)),
				100*p.ShareOfWall, p.RecursionMisses)
		}
		tw.Flush()
	}
}

func ms(ns int64) string {
	d := time.Duration(ns)
	if d < 10*time.Millisecond && d > -10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func kernel() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func writeJSON(path string, res any) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// printFloors gives each row's floor (-floor) beside its ratio: what is
// left above the floor is coldtrace's own work.
func printFloors(w io.Writer, res *results) {
	if res.FloorPrograms == 0 {
		return
	}
	fmt.Fprintf(w, "floor: the workload untraced beside %d empty BPF programs on coldtrace's tracepoints (F runs), over the same\n", res.FloorPrograms)
	fmt.Fprintln(w, "untraced neighbours: the kernel's cost of any tracer there; ratio − floor is coldtrace's own work")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tfloor\t90% interval\tratio\tover floor\t")
	for _, s := range res.Workloads {
		if len(s.FloorRatios) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f–%.3f\t%.3f\t%+.3f\t\n", s.Name, s.FloorMedian, s.FloorLo, s.FloorHi, s.RatioMedian, s.RatioMedian-s.FloorMedian)
	}
	tw.Flush()
}
