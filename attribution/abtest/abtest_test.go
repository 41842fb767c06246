package abtest

import (
	"math"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
)

const ms = int64(1e6)

// series builds A B A B … runs from wall times in ms, all CPU time, with
// the same system time everywhere.
func series(walls ...float64) []Run {
	var out []Run
	for i, w := range walls {
		side := A
		if i%2 == 1 {
			side = B
		}
		r := Run{Side: side, WallNS: int64(w * float64(ms)), SysNS: 5 * ms}
		r.Split[4] = r.WallNS // cpu
		out = append(out, r)
	}
	return out
}

func TestNoDifference(t *testing.T) {
	s := Analyze(series(1000, 1003, 998, 995, 1001, 1002, 999), Options{})
	if s.Verdict.Kind != NoDifference || !s.Verdict.Straddles {
		t.Fatalf("verdict %+v, want no difference with a range across zero", s.Verdict)
	}
	if len(s.Pairs) != 3 {
		t.Fatalf("pairs %d, want 3", len(s.Pairs))
	}
	if len(s.Verdict.Why) != 0 {
		t.Errorf("why %+v for no difference", s.Verdict.Why)
	}
}

func TestRealTenPercent(t *testing.T) {
	s := Analyze(series(1000, 902, 1004, 898, 997, 901, 1001), Options{})
	if s.Verdict.Kind != BFaster {
		t.Fatalf("verdict %+v, want B faster", s.Verdict)
	}
	if math.Abs(s.MedianPct+10) > 0.5 {
		t.Errorf("median %.2f%%, want about -10%%", s.MedianPct)
	}
	// B at 902 against (1000+1004)/2 = 1002: -100 ms.
	if s.Pairs[0].DiffNS != -100*ms {
		t.Errorf("first pair %v, want -100ms", s.Pairs[0].DiffNS)
	}
	if len(s.Verdict.Why) != 1 || s.Verdict.Why[0].Category != attribution.CPU {
		t.Errorf("why %+v, want cpu", s.Verdict.Why)
	}
	if !s.HasDrift || math.Abs(s.FirstLastPct-0.1) > 1e-9 {
		t.Errorf("first vs last A %v %.3f%%, want +0.1%%", s.HasDrift, s.FirstLastPct)
	}
	slower := Analyze(series(900, 1000, 902, 1001, 899), Options{})
	if slower.Verdict.Kind != BSlower {
		t.Errorf("reversed: %+v, want B slower", slower.Verdict)
	}
}

// A machine slowing down 5% a run with nothing between A and B: the
// brackets cancel it, and the drift (first to last A) is 30%.
func TestLinearDrift(t *testing.T) {
	s := Analyze(series(1000, 1050, 1100, 1150, 1200, 1250, 1300), Options{})
	if s.Verdict.Kind != NoDifference {
		t.Fatalf("verdict %+v, want no difference beyond drift", s.Verdict)
	}
	if math.Abs(s.DriftPct-30) > 1e-9 || math.Abs(s.FirstLastPct-30) > 1e-9 {
		t.Errorf("drift %.2f%%, first vs last %.2f%%, want 30%% and 30%%", s.DriftPct, s.FirstLastPct)
	}
	for _, p := range s.Pairs {
		if p.DiffNS != 0 {
			t.Errorf("pair %+v: the bracket should cancel a linear drift", p)
		}
	}
	// A 2% difference under a 20% drift is within the drift.
	d := Analyze(series(1000, 1020, 1100, 1120, 1200), Options{})
	if d.Verdict.Kind != NoDifference || !d.Verdict.WithinDrift || d.Verdict.Straddles {
		t.Errorf("small difference under drift: %+v", d.Verdict)
	}
}

// Noise that happens to fall one way in every pair: the Bs lie inside
// the As' spread, so it is no difference.
func TestOneSidedNoiseWithinSpread(t *testing.T) {
	s := Analyze(series(1000, 1001, 1006, 1002, 1003, 1000, 1004, 999, 1002), Options{})
	if s.MaxNS >= 0 || s.Verdict.Straddles || s.Verdict.WithinDrift {
		t.Fatalf("fixture: range %d…%d, %+v", s.MinNS, s.MaxNS, s.Verdict)
	}
	if s.Verdict.Kind != NoDifference || !s.Verdict.WithinSpread {
		t.Errorf("verdict %+v, want no difference: the Bs lie within the As", s.Verdict)
	}
}

func TestOneOutlier(t *testing.T) {
	runs := series(1000, 900, 1002, 2700, 998, 901, 1001, 899, 1003)
	s := Analyze(runs, Options{})
	if s.Status[3] != Outlier {
		t.Fatalf("status %v, want run 4 an outlier", s.Status)
	}
	for i, st := range s.Status {
		if i != 3 && st != Counted {
			t.Errorf("run %d: %s", i+1, st)
		}
	}
	if s.Verdict.Kind != BFaster || len(s.Pairs) != 3 {
		t.Errorf("verdict %+v over %d pairs, want B faster over 3", s.Verdict, len(s.Pairs))
	}
	// Without the outlier set apart, its pair would straddle zero.
	if s.MaxNS > 0 {
		t.Errorf("max diff %v: the outlier leaked into the range", s.MaxNS)
	}
}

func TestSlowModeSetApart(t *testing.T) {
	runs := series(1000, 900, 1001, 905, 999, 902, 1000)
	runs[2].SysNS = 40 * ms // 8× the least, 35 ms over it
	runs[2].WallNS = 1400 * ms
	s := Analyze(runs, Options{})
	if s.Status[2] != Slow {
		t.Fatalf("status %v, want run 3 slow", s.Status)
	}
	// Run 2's bracket then reaches over run 3 to run 5.
	if s.Pairs[0].After != 4 {
		t.Errorf("pair 1 %+v, want its A after to be run 5", s.Pairs[0])
	}
	if s.Verdict.Kind != BFaster {
		t.Errorf("verdict %+v", s.Verdict)
	}
	// A command with 1 ms of system time is not in the slow mode at 3 ms.
	tiny := series(100, 90, 100, 90, 100)
	for i := range tiny {
		tiny[i].SysNS = ms
	}
	tiny[1].SysNS = 3 * ms
	if st := Analyze(tiny, Options{}).Status[1]; st != Counted {
		t.Errorf("tiny system time: %s", st)
	}
}

func TestInterferenceMayExplain(t *testing.T) {
	runs := series(1000, 1001, 1000, 999, 1000, 800, 1000)
	runs[5].Interfered = true // the one fast B coincided with interference
	runs[1].WallNS, runs[3].WallNS = 850*ms, 860*ms
	s := Analyze(runs, Options{})
	if s.Verdict.Kind != BFaster {
		t.Fatalf("verdict %+v", s.Verdict)
	}
	if s.Verdict.Interference || s.Verdict.CleanKind != BFaster {
		t.Errorf("clean pairs agree, yet %+v", s.Verdict)
	}
	runs[1].WallNS, runs[3].WallNS = 1001*ms, 999*ms
	runs[1].Interfered, runs[3].Interfered = true, true
	s = Analyze(runs, Options{})
	if !s.Verdict.Interference {
		t.Errorf("every pair interfered: %+v", s.Verdict)
	}
}

// The CI bench of the same command on both sides: two of its six Bs in
// the slow mode (system time over twice the least), the other four 0.4–3 ms faster than the As
// around them, one of them inside the As' range. Four pairs of one sign
// come by chance 1 time in 8: no verdict. Every B well beyond every A is
// one, however few the pairs.
func TestFewPairsOfOneSign(t *testing.T) {
	runs := series(60, 58, 57, 71, 62, 56, 58, 56, 61, 57, 59, 61, 58)
	runs[3].SysNS, runs[11].SysNS = 29*ms, 27*ms // slow mode
	s := Analyze(runs, Options{})
	if len(s.Pairs) != 4 || s.MaxNS >= 0 {
		t.Fatalf("pairs %+v: want four, all B faster", s.Pairs)
	}
	if s.Verdict.Kind != TooFew || s.Verdict.Pairs != 4 {
		t.Errorf("verdict %+v, want too few pairs (4)", s.Verdict)
	}
	runs = series(200, 31, 210, 32, 205)
	if s := Analyze(runs, Options{}); s.Verdict.Kind != BFaster {
		t.Errorf("every B far beyond every A over 2 pairs: %+v", s.Verdict)
	}
}

// The second CI bench of the same command on both sides: system time
// 0–14 ms from run to run of a 60 ms command. Three of the As had twice
// the least and 10 ms over it, yet no slower a wall: set apart as slow,
// they left the Bs bracketed by the slower As, and all six pairs said B
// was faster. Only a run that was slower too is in the slow mode.
func TestSlowModeNeedsASlowerRun(t *testing.T) {
	runs := series(63, 59, 59, 58, 58, 59, 58, 58, 60, 60, 58, 60, 60)
	for i, sys := range []int64{14, 8, 0, 6, 4, 7, 10, 11, 9, 13, 12, 11, 5} {
		runs[i].SysNS = sys * ms
	}
	s := Analyze(runs, Options{})
	if s.Status[0] != Slow {
		t.Errorf("run 1 (63 ms, 14 ms of system time): %s, want slow mode", s.Status[0])
	}
	for _, i := range []int{6, 10} {
		if s.Status[i] == Slow {
			t.Errorf("run %d (58 ms, faster than its side's median) set apart as slow", i+1)
		}
	}
	if s.Verdict.Kind == BFaster || s.Verdict.Kind == BSlower {
		t.Errorf("verdict %+v for the same command on both sides (pairs %+v)", s.Verdict, s.Pairs)
	}
}

func TestTooFewAndFailed(t *testing.T) {
	runs := series(1000, 900, 1000)
	runs[0].Failed, runs[2].Failed = true, true
	s := Analyze(runs, Options{})
	if s.Verdict.Kind != TooFew || s.Status[0] != Failed {
		t.Errorf("%+v %v", s.Verdict, s.Status)
	}
}

func TestBracketsShuffled(t *testing.T) {
	sides := []Side{A, A, B, B, A, B}
	br := Brackets(len(sides), func(i int) bool { return sides[i] == A }, func(i int) bool { return sides[i] == B },
		func(int) bool { return true })
	want := []Bracket{{2, 1, 4}, {3, 1, 4}, {5, 4, -1}}
	if len(br) != len(want) {
		t.Fatalf("got %+v", br)
	}
	for i := range want {
		if br[i] != want[i] {
			t.Errorf("bracket %d: %+v, want %+v", i, br[i], want[i])
		}
	}
}

func TestMedian(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("odd: %v", got)
	}
	if got := Median([]int64{4, 1, 3, 2}); got != 2 {
		t.Errorf("even: %v", got)
	}
	if got := Median([]uint64(nil)); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

// One noisy A at an end is not drift: the fitted line through the As
// stays flat, while first vs last shows the noise.
func TestDriftIgnoresOneNoisyEnd(t *testing.T) {
	s := Analyze(series(1000, 500, 1010, 505, 990, 498, 1005, 502, 1600), Options{OutlierFloor: 10})
	if math.Abs(s.FirstLastPct-60) > 1e-9 {
		t.Errorf("first vs last %.1f%%, want 60%%", s.FirstLastPct)
	}
	if math.Abs(s.DriftPct) > 10 {
		t.Errorf("fitted drift %.1f%%, want under 10%% (first vs last says 60%%)", s.DriftPct)
	}
	if s.Verdict.Kind != BFaster {
		t.Errorf("verdict %+v", s.Verdict)
	}
}

// The CI bench that failed the A/A test: the same command on both sides,
// shuffled (A A B B B A B B A A B A A), six pairs all B-faster by
// 19 µs–2 ms, a median of −814 µs beyond the drift, the Bs' median just
// under the fastest A. Three Bs stood between the same two As, two more
// between the next two: three independent comparisons, which agree by
// chance 1 time in 4. No verdict.
func TestSharedBracketsCountOnce(t *testing.T) {
	order := []Side{A, A, B, B, B, A, B, B, A, A, B, A, A}
	walls := []float64{59, 56, 55.586, 55.5, 56.481, 57, 56.148, 54.45, 55.9, 55.7, 55.186, 56.1, 56}
	var runs []Run
	for i, w := range walls {
		r := Run{Side: order[i], WallNS: int64(w * float64(ms)), SysNS: 5 * ms}
		r.Split[4] = r.WallNS
		runs = append(runs, r)
	}
	s := Analyze(runs, Options{})
	if s.Status[0] != Outlier || len(s.Pairs) != 6 || s.MaxNS >= 0 || s.MedianNS != -814_000 {
		t.Fatalf("status %v, pairs %+v, median %d: not the CI bench", s.Status, s.Pairs, s.MedianNS)
	}
	if s.Verdict.Straddles || s.Verdict.WithinDrift || s.Verdict.WithinSpread {
		t.Fatalf("verdict %+v: a rule other than the sign test decided", s.Verdict)
	}
	if s.Verdict.Kind != TooFew || s.Verdict.Pairs != 6 || s.Verdict.Independent != 3 {
		t.Errorf("verdict %+v, want too few (6 pairs, 3 independent)", s.Verdict)
	}
	// The alternating order: every bracket its own.
	if s := Analyze(series(1000, 990, 1000, 991, 1000, 989, 1001, 990, 1000, 992, 1000), Options{}); s.Verdict.Kind != BFaster || s.Verdict.Independent != 5 {
		t.Errorf("alternating, five pairs of one sign: %+v", s.Verdict)
	}
}
