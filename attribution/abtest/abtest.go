package abtest

import (
	"math"
	"sort"

	"github.com/coldtrace/coldtrace/attribution"
)

// Side is which command a run belongs to.
type Side string

// The two sides.
const (
	A Side = "A"
	B Side = "B"
)

// Run is one counted run as the statistics see it, in run order.
type Run struct {
	Side   Side  `json:"side"`
	WallNS int64 `json:"wall_ns"`
	// SysNS is the system CPU time of the command and its children.
	SysNS int64 `json:"sys_ns"`
	// Split is the run's wall time by category (attribution's ledger).
	Split attribution.Split `json:"-"`
	// Failed runs (non-zero exit kept with --keep-going) take no part.
	Failed bool `json:"failed,omitempty"`
	// Interfered is set when other processes were busy during the run.
	Interfered bool `json:"interfered,omitempty"`
}

// Status says whether a run was counted and, if not, why.
type Status string

// Run statuses. Slow-mode runs and outliers are reported apart.
const (
	Counted Status = "counted"
	Slow    Status = "slow_mode"
	Outlier Status = "outlier"
	Failed  Status = "failed"
)

// Options tune the judgement. The zero value gives the defaults.
type Options struct {
	// SlowFactor: a run whose system time is over SlowFactor times the
	// least of its side is in the slow mode (2 when zero).
	SlowFactor float64
	// SlowFloorNS: and over the least by at least this much (10 ms when
	// zero), so a command that spends a millisecond in the kernel is not
	// judged on scheduler noise.
	SlowFloorNS int64
	// OutlierFloor: an outlier lies further than this fraction of its
	// side's median wall time from that median (0.02 when zero).
	OutlierFloor float64
}

func (o Options) withDefaults() Options {
	if o.SlowFactor <= 0 {
		o.SlowFactor = 2
	}
	if o.SlowFloorNS <= 0 {
		o.SlowFloorNS = 10e6
	}
	if o.OutlierFloor <= 0 {
		o.OutlierFloor = 0.02
	}
	return o
}

// Pair is one B against the mean of its neighbouring As.
type Pair struct {
	Bracket
	BNS   int64 `json:"b_ns"`
	RefNS int64 `json:"a_mean_ns"`
	// DiffNS is B minus the A mean: negative when B was faster.
	DiffNS  int64   `json:"diff_ns"`
	DiffPct float64 `json:"diff_pct"`
	// Split is the same difference by category; Categories by name.
	Split      attribution.Split              `json:"-"`
	Categories map[attribution.Category]int64 `json:"categories"`
	Interfered bool                           `json:"interfered,omitempty"`
}

// Kind is the verdict.
type Kind string

// Verdict kinds.
const (
	BFaster Kind = "b_faster"
	BSlower Kind = "b_slower"
	// NoDifference: the bracketed differences straddle zero, their median
	// is smaller than the drift, or the B runs' median lies within the
	// range of the A runs.
	NoDifference Kind = "no_difference_beyond_drift"
	// TooFew: no B had a counted A beside it, or fewer than MinPairs
	// independent pairs all agreed (Verdict.Pairs and
	// Verdict.Independent say how many).
	TooFew Kind = "too_few_runs"
)

// MinPairs is the fewest independent pairs whose agreeing signs make a
// verdict on their own: k pairs of one sign come by chance 2^(1-k) of the
// time when A and B are the same (a sign test), 1 in 16 for 5, 1 in 8 for
// 4. Seen in CI: the same command on both sides, two of six Bs in the
// slow mode, and the other four all 0.4–3 ms faster. Fewer make a verdict
// only when every counted B lies beyond every counted A.
//
// Bs that stand between the same two As (a shuffled order puts B B B
// between two As) are measured against the same reference: one slow A
// turns all of them the same way, so they count once. Seen in CI: the
// same command on both sides, shuffled, six pairs all B-faster, five of
// them against one A that ran 1 ms slow.
const MinPairs = 5

// CategoryDiff is one category's median difference (B minus A) across
// the pairs, with its range.
type CategoryDiff struct {
	Category attribution.Category `json:"category"`
	MedianNS int64                `json:"median_ns"`
	MinNS    int64                `json:"min_ns"`
	MaxNS    int64                `json:"max_ns"`
}

// Verdict is the judgement as data; report words it.
type Verdict struct {
	Kind Kind `json:"kind"`
	// Straddles: the range of the differences includes zero.
	Straddles bool `json:"range_includes_zero,omitempty"`
	// WithinDrift: |median difference| < |drift|.
	WithinDrift bool `json:"within_drift,omitempty"`
	// WithinSpread: the median of the B runs lies between the fastest
	// and the slowest counted A (the Bs fall inside the As' spread,
	// so nothing can be said).
	WithinSpread bool `json:"within_a_spread,omitempty"`
	// Why lists the categories that make the difference: those whose
	// median difference is at least a tenth of the whole difference,
	// largest first.
	Why []CategoryDiff `json:"why,omitempty"`
	// Interference is set when runs overlapped with other processes'
	// work and the verdict without the pairs they touched would differ
	// (or no pair would be left).
	Interference bool `json:"interference_may_explain,omitempty"`
	// CleanKind is the verdict from the pairs without interference.
	CleanKind Kind `json:"clean_kind,omitempty"`
	// Pairs is how many pairs were judged; Independent how many
	// distinct brackets (pairs of As) they were measured against, the
	// count the sign test takes.
	Pairs       int `json:"pairs"`
	Independent int `json:"independent_pairs"`
}

// Summary is the judgement of one bench.
type Summary struct {
	Status []Status `json:"status"`
	Pairs  []Pair   `json:"pairs"`
	// FirstLastNS is the last counted A minus the first (the plain
	// drift check), FirstLastPct the same against the first. DriftNS is the
	// drift the verdict weighs: the Theil–Sen line through the counted As
	// (the median of the slopes between every two of them) from the first
	// A to the last, so one noisy A at an end does not pass for a drifting
	// machine; with two As it is FirstLastNS. DriftPct is against the
	// line's value at the first A. HasDrift is false with fewer than two
	// counted As.
	HasDrift     bool    `json:"has_drift"`
	FirstLastNS  int64   `json:"first_last_ns"`
	FirstLastPct float64 `json:"first_last_pct"`
	DriftNS      int64   `json:"drift_ns"`
	DriftPct     float64 `json:"drift_pct"`
	// MedianNS is the median of the pairs' differences (B minus A);
	// MinNS and MaxNS their range; MedianPct the median of their percents.
	MedianNS  int64   `json:"median_diff_ns"`
	MinNS     int64   `json:"min_diff_ns"`
	MaxNS     int64   `json:"max_diff_ns"`
	MedianPct float64 `json:"median_diff_pct"`
	// Categories holds every category's median difference.
	Categories []CategoryDiff `json:"categories"`
	Verdict    Verdict        `json:"verdict"`
}

// Analyze judges runs, given in run order.
func Analyze(runs []Run, opt Options) Summary {
	opt = opt.withDefaults()
	s := Summary{Status: classify(runs, opt)}
	counted := func(i int) bool { return s.Status[i] == Counted }
	isA := func(i int) bool { return runs[i].Side == A }
	isB := func(i int) bool { return runs[i].Side == B }

	var aPos []int
	for i := range runs {
		if isA(i) && counted(i) {
			aPos = append(aPos, i)
		}
	}
	if len(aPos) >= 2 {
		first, last := aPos[0], aPos[len(aPos)-1]
		s.HasDrift = true
		s.FirstLastNS = runs[last].WallNS - runs[first].WallNS
		s.FirstLastPct = pct(s.FirstLastNS, runs[first].WallNS)
		walls := make([]float64, len(aPos))
		for k, i := range aPos {
			walls[k] = float64(runs[i].WallNS)
		}
		slope, atFirst := theilSen(aPos, walls)
		s.DriftNS = int64(math.Round(slope * float64(last-first)))
		s.DriftPct = pct(s.DriftNS, int64(math.Round(atFirst)))
	}

	for _, br := range Brackets(len(runs), isA, isB, counted) {
		p := Pair{Bracket: br, BNS: runs[br.B].WallNS}
		p.RefNS = int64(math.Round(br.RefMean(func(i int) float64 { return float64(runs[i].WallNS) })))
		p.DiffNS = p.BNS - p.RefNS
		p.DiffPct = pct(p.DiffNS, p.RefNS)
		p.Categories = map[attribution.Category]int64{}
		for c := range p.Split {
			ref := br.RefMean(func(i int) float64 { return float64(runs[i].Split[c]) })
			p.Split[c] = runs[br.B].Split[c] - int64(math.Round(ref))
			p.Categories[attribution.Categories[c]] = p.Split[c]
		}
		p.Interfered = runs[br.B].Interfered
		for _, i := range br.Refs() {
			p.Interfered = p.Interfered || runs[i].Interfered
		}
		s.Pairs = append(s.Pairs, p)
	}

	var diffs []int64
	var pcts []float64
	for _, p := range s.Pairs {
		diffs = append(diffs, p.DiffNS)
		pcts = append(pcts, p.DiffPct)
	}
	s.MedianNS, s.MedianPct = Median(diffs), Median(pcts)
	s.MinNS, s.MaxNS = MinMax(diffs)
	for c, cat := range attribution.Categories {
		var ds []int64
		for _, p := range s.Pairs {
			ds = append(ds, p.Split[c])
		}
		cd := CategoryDiff{Category: cat, MedianNS: Median(ds)}
		cd.MinNS, cd.MaxNS = MinMax(ds)
		s.Categories = append(s.Categories, cd)
	}
	var aWalls, bWalls []int64
	for i, r := range runs {
		if counted(i) && isA(i) {
			aWalls = append(aWalls, r.WallNS)
		} else if counted(i) && isB(i) {
			bWalls = append(bWalls, r.WallNS)
		}
	}
	spread := spread{bMedian: Median(bWalls)}
	spread.aLo, spread.aHi = MinMax(aWalls)
	spread.bLo, spread.bHi = MinMax(bWalls)
	s.Verdict = judge(s.Pairs, s.HasDrift, s.DriftNS, spread)
	s.Verdict.Why = why(s.Categories, s.MedianNS, s.Verdict.Kind)

	var clean []Pair
	interfered := false
	for _, p := range s.Pairs {
		if p.Interfered {
			interfered = true
		} else {
			clean = append(clean, p)
		}
	}
	if interfered {
		s.Verdict.CleanKind = judge(clean, s.HasDrift, s.DriftNS, spread).Kind
		s.Verdict.Interference = s.Verdict.CleanKind != s.Verdict.Kind || len(clean) == 0
	}
	return s
}

// spread is where the counted runs lie: the As' range, the Bs' median
// and range.
type spread struct{ aLo, aHi, bMedian, bLo, bHi int64 }

// judge applies the rule to pairs: no pair → TooFew; a range that
// includes zero, |median| < |drift|, or a B median inside the As' range
// → NoDifference; fewer than MinPairs independent pairs → TooFew;
// otherwise the sign of the median.
func judge(pairs []Pair, hasDrift bool, driftNS int64, sp spread) Verdict {
	if len(pairs) == 0 {
		return Verdict{Kind: TooFew}
	}
	var diffs []int64
	for _, p := range pairs {
		diffs = append(diffs, p.DiffNS)
	}
	med := Median(diffs)
	lo, hi := MinMax(diffs)
	v := Verdict{
		Straddles:    lo <= 0 && hi >= 0,
		WithinDrift:  hasDrift && abs(med) < abs(driftNS),
		WithinSpread: sp.bMedian >= sp.aLo && sp.bMedian <= sp.aHi,
		Pairs:        len(pairs),
		Independent:  independent(pairs),
	}
	switch {
	case v.Straddles || v.WithinDrift || v.WithinSpread:
		v.Kind = NoDifference
	case v.Independent < MinPairs && !(med < 0 && sp.bHi < sp.aLo) && !(med > 0 && sp.bLo > sp.aHi):
		v.Kind = TooFew
	case med < 0:
		v.Kind = BFaster
	default:
		v.Kind = BSlower
	}
	return v
}

// independent counts the distinct brackets among pairs: Bs between the
// same two As share their reference and are one observation to a sign
// test (see MinPairs).
func independent(pairs []Pair) int {
	seen := map[[2]int]bool{}
	for _, p := range pairs {
		seen[[2]int{p.Before, p.After}] = true
	}
	return len(seen)
}

// why keeps the categories that carry at least a tenth of the median
// difference, in the direction of the verdict first, largest first.
func why(cats []CategoryDiff, medianNS int64, kind Kind) []CategoryDiff {
	if kind != BFaster && kind != BSlower {
		return nil
	}
	var out []CategoryDiff
	for _, c := range cats {
		if c.MedianNS != 0 && 10*abs(c.MedianNS) >= abs(medianNS) {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		si, sj := sameSign(out[i].MedianNS, medianNS), sameSign(out[j].MedianNS, medianNS)
		if si != sj {
			return si
		}
		return abs(out[i].MedianNS) > abs(out[j].MedianNS)
	})
	return out
}

// classify sets failed runs apart, then slow-mode runs (system time over
// SlowFactor times the least of the same side, and over it by at least
// SlowFloorNS), then outliers of wall time among what is left of each
// side.
func classify(runs []Run, opt Options) []Status {
	st := make([]Status, len(runs))
	for i, r := range runs {
		st[i] = Counted
		if r.Failed {
			st[i] = Failed
		}
	}
	for _, side := range []Side{A, B} {
		least := int64(-1)
		var sideWalls []int64
		for i, r := range runs {
			if r.Side == side && st[i] == Counted {
				sideWalls = append(sideWalls, r.WallNS)
				if least < 0 || r.SysNS < least {
					least = r.SysNS
				}
			}
		}
		// The slow mode costs time: a run with the system time of it but
		// no slower than its side's median was not slowed, and setting
		// it apart would only skew the pairs (seen in CI: a 60 ms command
		// whose system time ranged 0–14 ms from run to run lost its three
		// fastest As that way, and the Bs all looked faster).
		median := Median(sideWalls)
		for i, r := range runs {
			if r.Side == side && st[i] == Counted && least >= 0 && r.WallNS > median &&
				float64(r.SysNS) > opt.SlowFactor*float64(least) && r.SysNS-least >= opt.SlowFloorNS {
				st[i] = Slow
			}
		}
		var idx []int
		var walls []float64
		for i, r := range runs {
			if r.Side == side && st[i] == Counted {
				idx = append(idx, i)
				walls = append(walls, float64(r.WallNS))
			}
		}
		for k, out := range madOutliers(walls, opt.OutlierFloor*Median(walls)) {
			if out {
				st[idx[k]] = Outlier
			}
		}
	}
	return st
}

func pct(diff, ref int64) float64 {
	if ref == 0 {
		return 0
	}
	return 100 * float64(diff) / float64(ref)
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func sameSign(a, b int64) bool { return (a < 0) == (b < 0) }
