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
