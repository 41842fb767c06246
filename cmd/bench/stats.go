package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/coldtrace/coldtrace/attribution/abtest"
)

// summary is one workload's result.
type summary struct {
	*workload
	// Ratios are each traced run's wall time over the mean of the
	// untraced runs on either side of it.
	Ratios      []float64 `json:"ratios"`
	RatioMedian float64   `json:"ratio_median"`
	RatioMin    float64   `json:"ratio_min"`
	RatioMax    float64   `json:"ratio_max"`
	// RatioLo and RatioHi are the 90% percentile-bootstrap interval of
	// the median ratio; Judged says where it lies against the budget
	// (see judgement).
	RatioLo float64 `json:"ratio_lo_90"`
	RatioHi float64 `json:"ratio_hi_90"`
	Judged  string  `json:"judged,omitempty"`
	// FloorRatios are the floor runs' (-floor) wall times over the same
	// untraced neighbours, with their median and its 90% interval: what
	// empty programs on coldtrace's tracepoints cost the workload.
	FloorRatios []float64 `json:"floor_ratios,omitempty"`
	FloorMedian float64   `json:"floor_ratio_median,omitempty"`
	FloorLo     float64   `json:"floor_ratio_lo_90,omitempty"`
	FloorHi     float64   `json:"floor_ratio_hi_90,omitempty"`
	// DriftPct is the last untraced run against the first, in percent;
	// SpreadPct the slowest untraced run against the fastest.
	DriftPct         float64 `json:"untraced_drift_pct"`
	SpreadPct        float64 `json:"untraced_spread_pct"`
	UntracedMedianNS int64   `json:"untraced_wall_median_ns"`
	TracedMedianNS   int64   `json:"traced_wall_median_ns"`
	StartupMedianNS  int64   `json:"startup_median_ns"`
	StartupMaxNS     int64   `json:"startup_max_ns"`
	LaunchExtraNS    int64   `json:"launch_extra_median_ns"` // traced minus untraced spawn → main()
	CPUMedianNS      int64   `json:"coldtrace_cpu_median_ns"`
	MaxRSSBytes      uint64  `json:"coldtrace_max_rss_bytes"`
	EventsSeenMedian uint64  `json:"events_seen_median"`
	// Python stack walks and reuses per traced run (medians).
	PyWalksMedian    uint64      `json:"python_walks_median"`
	PyReusesMedian   uint64      `json:"python_reuses_median"`
	LostEvents       uint64      `json:"lost_events_total"`
	BgCPUMedian      float64     `json:"bg_cpu_median"`
	StealMedian      float64     `json:"steal_median"`
	SwitchRateMedian float64     `json:"untraced_switch_rate_median,omitempty"`
	Misses           []string    `json:"misses,omitempty"`
	Warnings         []string    `json:"warnings,omitempty"`
	Runs             []runResult `json:"runs"`
	BPF              []progStat  `json:"bpf_programs,omitempty"`
	BPFWallNS        int64       `json:"bpf_stats_wall_ns,omitempty"`
	Profile          string      `json:"coldtrace_profile,omitempty"`
}

func median[T int64 | uint64 | float64](xs []T) T { return abtest.Median(xs) }

// bootstrapMedian is the conf interval of the median of xs by the
// percentile bootstrap (a fixed seed: the same ratios give the same
// interval).
func bootstrapMedian(xs []float64, resamples int, conf float64) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, resamples)
	sample := make([]float64, len(xs))
	for i := range meds {
		for j := range sample {
			sample[j] = xs[rng.IntN(len(xs))]
		}
		meds[i] = median(sample)
	}
	slices.Sort(meds)
	tail := (1 - conf) / 2
	at := func(q float64) float64 { return meds[min(len(meds)-1, int(q*float64(len(meds))))] }
	return at(tail), at(1 - tail)
}

// bracketRatios gives each traced run's wall over the mean of its untraced
// neighbours in the run order (one neighbour at an end): the bracketing
// of coldtrace bench, with U as A and T as B.
func bracketRatios(runs []runResult) []float64 { return kindRatios(runs, "T") }

// kindRatios is bracketRatios for the runs of kind (T, or F: the floor).
func kindRatios(runs []runResult, kind string) []float64 {
	var out []float64
	brackets := abtest.Brackets(len(runs),
		func(i int) bool { return runs[i].Kind == "U" },
		func(i int) bool { return runs[i].Kind == kind },
		func(int) bool { return true })
	for _, b := range brackets {
		ref := b.RefMean(func(i int) float64 { return float64(runs[i].WallNS) })
		if ref == 0 {
			continue
		}
		out = append(out, float64(runs[b.B].WallNS)/ref)
	}
	return out
}

// summarize computes w's figures from its measured runs (U and T, in order).
func summarize(w *workload, runs []runResult) *summary {
	s := &summary{workload: w, Runs: runs}
	s.Ratios = bracketRatios(runs)
	if len(s.Ratios) > 0 {
		s.RatioMedian = median(s.Ratios)
		s.RatioMin, s.RatioMax = math.Inf(1), math.Inf(-1)
		for _, r := range s.Ratios {
			s.RatioMin, s.RatioMax = min(s.RatioMin, r), max(s.RatioMax, r)
		}
		s.RatioLo, s.RatioHi = bootstrapMedian(s.Ratios, 2000, 0.90)
	}
	if s.FloorRatios = kindRatios(runs, "F"); len(s.FloorRatios) > 0 {
		s.FloorMedian = median(s.FloorRatios)
		s.FloorLo, s.FloorHi = bootstrapMedian(s.FloorRatios, 2000, 0.90)
	}
	var uWall, tWall, uLaunch, tLaunch, startup, cpu []int64
	var events, walks, reuses []uint64
	var bg, steal, rate []float64
	var check *uint64
	for _, r := range runs {
		bg = append(bg, r.BgCPU)
		steal = append(steal, r.Steal)
		if check == nil {
			check = &r.Check
		} else if r.Check != *check {
			s.Warnings = append(s.Warnings, fmt.Sprintf("run %s%d: check value %d differs from %d: the runs did not do the same work", r.Kind, r.Index, r.Check, *check))
		}
		if w.File != "" && !w.Cold && r.ResidentAtStart < 0.99 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("run %s%d: only %.0f%% of %s was cached at the start of a warm run", r.Kind, r.Index, 100*r.ResidentAtStart, w.File))
		}
		if r.Late {
			s.Warnings = append(s.Warnings, fmt.Sprintf("run %s%d started after its start time (launch %v > delay): raise -delay", r.Kind, r.Index, time.Duration(r.LaunchNS).Round(time.Millisecond)))
		}
		switch r.Kind {
		case "U":
			uWall = append(uWall, r.WallNS)
			uLaunch = append(uLaunch, r.LaunchNS)
			if r.WallNS > 0 {
				rate = append(rate, float64(r.Switches)/(float64(r.WallNS)/1e9))
			}
		case "T":
			tWall = append(tWall, r.WallNS)
			tLaunch = append(tLaunch, r.LaunchNS)
			if t := r.Trace; t != nil {
				startup = append(startup, t.StartupNS)
				cpu = append(cpu, t.CPUNS)
				events = append(events, t.EventsSeen)
				walks = append(walks, t.PyWalks)
				reuses = append(reuses, t.PyReuses)
				s.MaxRSSBytes = max(s.MaxRSSBytes, t.MaxRSSBytes)
				s.LostEvents += t.LostEvents
				s.StartupMaxNS = max(s.StartupMaxNS, t.StartupNS)
				if w.Cold && w.File != "" && t.FileMissed == 0 {
					s.Warnings = append(s.Warnings, fmt.Sprintf("run T%d: coldtrace saw no page-cache misses on %s, which was evicted", r.Index, w.File))
				}
				for _, m := range t.Warnings {
					s.Warnings = append(s.Warnings, fmt.Sprintf("run T%d: coldtrace: %s", r.Index, m))
				}
			}
		}
	}
	if len(uWall) >= 2 {
		s.DriftPct = 100 * (float64(uWall[len(uWall)-1])/float64(uWall[0]) - 1)
		lo, hi := uWall[0], uWall[0]
		for _, v := range uWall {
			lo, hi = min(lo, v), max(hi, v)
		}
		s.SpreadPct = 100 * (float64(hi)/float64(lo) - 1)
	}
	s.UntracedMedianNS, s.TracedMedianNS = median(uWall), median(tWall)
	s.StartupMedianNS = median(startup)
	s.LaunchExtraNS = median(tLaunch) - median(uLaunch)
	s.CPUMedianNS = median(cpu)
	s.EventsSeenMedian = median(events)
	s.PyWalksMedian, s.PyReusesMedian = median(walks), median(reuses)
	s.BgCPUMedian, s.StealMedian = median(bg), median(steal)
	if w.MinRate > 0 {
		s.SwitchRateMedian = median(rate)
		if s.SwitchRateMedian < w.MinRate {
			s.Warnings = append(s.Warnings, fmt.Sprintf("untraced ping-pong made %.0fk switches/s, under the %.0fk/s the workload is meant to reach", s.SwitchRateMedian/1e3, w.MinRate/1e3))
		}
	}
	return s
}

// A row's wall ratio against its budget, judged on the 90% interval of
// its median: met when the whole interval is within the budget, missed
// when the median is over it, undecided when the median is within but
// the interval is not (this VM's run-to-run noise alone moves a median
// of 7 pairs by several percent; more pairs narrow the interval).
const (
	judgedMet       = "met"
	judgedMissed    = "missed"
	judgedUndecided = "undecided"
)

func judgement(median, hi, budget float64) string {
	switch {
	case median > budget:
		return judgedMissed
	case hi > budget:
		return judgedUndecided
	}
	return judgedMet
}

// decided says whether more pairs could still change a row's judgement:
// false while its interval holds the budget.
func decided(ratios []float64, budget float64) bool {
	if len(ratios) == 0 {
		return false
	}
	lo, hi := bootstrapMedian(ratios, 2000, 0.90)
	return lo > budget || hi <= budget
}

// checkBudgets fills s.Misses with every budget s misses.
func (s *summary) checkBudgets() {
	miss := func(format string, a ...any) {
		s.Misses = append(s.Misses, fmt.Sprintf("%s: ", s.Name)+fmt.Sprintf(format, a...))
	}
	s.Judged = ""
	if len(s.Ratios) == 0 {
		miss("no traced run to compare")
	} else {
		s.Judged = judgement(s.RatioMedian, s.RatioHi, s.Budget)
		switch s.Judged {
		case judgedMissed:
			miss("wall ratio %.3f > %.2f (90%% interval %.3f–%.3f, %d pairs, untraced drift %+.1f%%)",
				s.RatioMedian, s.Budget, s.RatioLo, s.RatioHi, len(s.Ratios), s.DriftPct)
		case judgedUndecided:
			miss("wall ratio %.3f not shown within %.2f: its 90%% interval %.3f–%.3f holds the budget (%d pairs; -max-pairs adds pairs until it does not)",
				s.RatioMedian, s.Budget, s.RatioLo, s.RatioHi, len(s.Ratios))
		}
	}
	if time.Duration(s.StartupMedianNS) > startupBudget {
		miss("startup %v > %v", time.Duration(s.StartupMedianNS).Round(time.Millisecond), startupBudget)
	}
	if s.MaxRSSBytes > rssBudget {
		miss("peak RSS %.1f MiB > %d MiB", float64(s.MaxRSSBytes)/(1<<20), rssBudget>>20)
	}
	if s.NoLoss && s.LostEvents > 0 {
		miss("%d events lost", s.LostEvents)
	}
}
