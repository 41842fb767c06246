package main

import (
	"math"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("odd: got %v", got)
	}
	if got := median([]int64{4, 1, 3, 2}); got != 2 {
		t.Errorf("even: got %v, want the lower-mean 2", got)
	}
	if got := median([]uint64(nil)); got != 0 {
		t.Errorf("empty: got %v", got)
	}
}

func runsOf(kinds string, walls ...int64) []runResult {
	var out []runResult
	for i, k := range kinds {
		out = append(out, runResult{Kind: string(k), Index: i / 2, WallNS: walls[i]})
	}
	return out
}

func TestBracketRatios(t *testing.T) {
	// A machine that slows down by 10 each run: traced runs cost 5 more.
	runs := runsOf("UTUTU", 100, 115, 120, 135, 140)
	got := bracketRatios(runs)
	want := []float64{115.0 / 110, 135.0 / 130}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("ratio %d: got %v, want %v", i, got[i], want[i])
		}
	}
	// Without a closing untraced run the last traced run has one neighbour.
	got = bracketRatios(runsOf("UT", 100, 110))
	if len(got) != 1 || math.Abs(got[0]-1.1) > 1e-12 {
		t.Errorf("one neighbour: got %v", got)
	}
}

func TestSummarizeAndBudgets(t *testing.T) {
	w := &workload{Name: "seqread", Budget: 1.02, NoLoss: true}
	runs := runsOf("UTUTU", 100, 105, 100, 106, 110)
	for i := range runs {
		if runs[i].Kind == "T" {
			runs[i].Trace = &traceResult{StartupNS: 250e6, MaxRSSBytes: 80 << 20, LostEvents: 2, EventsSeen: 7}
		}
	}
	s := summarize(w, runs)
	if math.Abs(s.DriftPct-10) > 1e-9 || math.Abs(s.SpreadPct-10) > 1e-9 {
		t.Errorf("drift %v spread %v, want 10 and 10", s.DriftPct, s.SpreadPct)
	}
	if s.LostEvents != 4 || s.EventsSeenMedian != 7 {
		t.Errorf("lost %d events %d", s.LostEvents, s.EventsSeenMedian)
	}
	s.checkBudgets()
	all := strings.Join(s.Misses, "\n")
	for _, want := range []string{"wall ratio", "startup", "peak RSS", "4 events lost"} {
		if !strings.Contains(all, want) {
			t.Errorf("misses %q lack %q", all, want)
		}
	}

	ok := summarize(&workload{Name: "ctxswitch", Budget: 1.10}, runsOf("UTU", 100, 105, 100))
	ok.checkBudgets()
	if len(ok.Misses) != 0 {
		t.Errorf("unexpected misses %v", ok.Misses)
	}
}

// ratioRuns makes runs U T U T … U whose traced runs have the given
// ratios to untraced runs of 1,000 ns each.
func ratioRuns(ratios ...float64) []runResult {
	runs := []runResult{{Kind: "U", WallNS: 1000}}
	for i, r := range ratios {
		runs = append(runs, runResult{Kind: "T", Index: i, WallNS: int64(r * 1000)},
			runResult{Kind: "U", Index: i + 1, WallNS: 1000})
	}
	return runs
}

func TestBudgetsAreJudgedOnTheMediansInterval(t *testing.T) {
	w := &workload{Name: "forkexec", Budget: 1.10}
	cases := []struct {
		name   string
		ratios []float64
		judged string
		miss   string
	}{
		{"tight and within", []float64{1.04, 1.05, 1.05, 1.06, 1.05, 1.04, 1.06}, judgedMet, ""},
		{"within at the median only", []float64{0.90, 1.30, 1.02, 1.25, 1.05, 0.95, 1.20}, judgedUndecided, "not shown within 1.10"},
		{"over", []float64{1.15, 1.20, 1.18, 1.02, 1.22, 1.16, 1.19}, judgedMissed, "wall ratio 1.180 > 1.10"},
	}
	for _, c := range cases {
		s := summarize(w, ratioRuns(c.ratios...))
		s.checkBudgets()
		if s.Judged != c.judged {
			t.Errorf("%s: judged %q, want %q (interval %.3f–%.3f)", c.name, s.Judged, c.judged, s.RatioLo, s.RatioHi)
		}
		if !(s.RatioLo <= s.RatioMedian && s.RatioMedian <= s.RatioHi) {
			t.Errorf("%s: interval %.3f–%.3f does not hold the median %.3f", c.name, s.RatioLo, s.RatioHi, s.RatioMedian)
		}
		all := strings.Join(s.Misses, "\n")
		if c.miss == "" && all != "" || c.miss != "" && !strings.Contains(all, c.miss) {
			t.Errorf("%s: misses %q, want %q", c.name, all, c.miss)
		}
		// More pairs are wanted exactly while the interval holds the budget.
		if got, want := decided(s.Ratios, w.Budget), s.RatioLo > w.Budget || s.RatioHi <= w.Budget; got != want {
			t.Errorf("%s: decided %v with interval %.3f–%.3f", c.name, got, s.RatioLo, s.RatioHi)
		}
	}
	if decided(nil, 1.1) {
		t.Error("no ratios judged decided")
	}
}

func TestMaxPairsIsAtLeastPairs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{{[]string{"-pairs", "9"}, 9}, {[]string{"-pairs", "9", "-max-pairs", "40"}, 40}, {[]string{"-pairs", "9", "-max-pairs", "3"}, 9}, {[]string{"-smoke", "-max-pairs", "40"}, 1}} {
		o, err := parseFlags(c.args, &strings.Builder{})
		if err != nil {
			t.Fatal(err)
		}
		if o.maxPairs != c.want {
			t.Errorf("%v: max pairs %d, want %d", c.args, o.maxPairs, c.want)
		}
	}
}

func TestSummarizeFlagsDifferentWork(t *testing.T) {
	runs := runsOf("UTU", 100, 100, 100)
	runs[1].Check = 42
	s := summarize(&workload{Name: "x", Budget: 1.1}, runs)
	if len(s.Warnings) == 0 || !strings.Contains(s.Warnings[0], "did not do the same work") {
		t.Errorf("warnings %v", s.Warnings)
	}
}

func TestParseWork(t *testing.T) {
	out := []byte("noise\n{\"entry_ns\":1,\"start_ns\":2,\"elapsed_ns\":3,\"late\":true,\"check\":4,\"switches\":5}\n")
	r, err := parseWork(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.EntryNS != 1 || r.StartNS != 2 || r.ElapsedNS != 3 || !r.Late || r.Check != 4 || r.Switches != 5 {
		t.Errorf("got %+v", r)
	}
	if _, err := parseWork([]byte("nothing")); err == nil {
		t.Error("no error for output without a result")
	}
}

func TestParseFlagsSmokeDefaults(t *testing.T) {
	o, err := parseFlags([]string{"-smoke", "-pairs", "9"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if o.pairs != 1 || o.warmup != 0 || o.settle != 0 || o.bpfStats != "off" {
		t.Errorf("smoke options %+v", o)
	}
	if _, err := parseFlags([]string{"-only", "nope"}, &strings.Builder{}); err == nil {
		t.Error("no error for an unknown workload")
	}
}

// A floor run (F) sits between a traced run and an untraced one: both
// are set against the same untraced neighbours, and the floor's runs
// change neither the traced ratios nor the untraced medians.
func TestFloorRunsShareTheUntracedNeighbours(t *testing.T) {
	// A machine slowing by 10 each untraced run: tracing costs 12, the
	// floor 4.
	runs := runsOf("UTFUFTU", 100, 117, 109, 110, 118, 127, 120)
	for i := range runs {
		if runs[i].Kind == "T" {
			runs[i].Trace = &traceResult{}
		}
	}
	s := summarize(&workload{Name: "netpong", Budget: 1.2}, runs)
	near := func(got []float64, want ...float64) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				return false
			}
		}
		return true
	}
	if !near(s.Ratios, 117.0/105, 127.0/115) {
		t.Errorf("traced ratios %v, want %v", s.Ratios, []float64{117.0 / 105, 127.0 / 115})
	}
	if !near(s.FloorRatios, 109.0/105, 118.0/115) {
		t.Errorf("floor ratios %v, want %v", s.FloorRatios, []float64{109.0 / 105, 118.0 / 115})
	}
	if s.FloorMedian == 0 || s.FloorLo > s.FloorMedian || s.FloorHi < s.FloorMedian {
		t.Errorf("floor median %v, interval %v–%v", s.FloorMedian, s.FloorLo, s.FloorHi)
	}
	if s.UntracedMedianNS != 110 || s.TracedMedianNS != 122 {
		t.Errorf("untraced median %d, traced %d: floor runs counted as either", s.UntracedMedianNS, s.TracedMedianNS)
	}
	var out strings.Builder
	printFloors(&out, &results{FloorPrograms: 23, Workloads: []*summary{s}})
	if got := out.String(); !strings.Contains(got, "23 empty BPF programs") || !strings.Contains(got, "netpong") ||
		!strings.Contains(got, "+0.07") {
		t.Errorf("floor table:\n%s", got)
	}
	out.Reset()
	printFloors(&out, &results{Workloads: []*summary{s}})
	if out.Len() != 0 {
		t.Errorf("a floor table without -floor:\n%s", out.String())
	}
}
