package abtest

import (
	"math"
	"sort"
)

// Median is the middle value of xs (the mean of the two middle values
// for an even count); 0 for none. xs is not changed.
func Median[T int64 | uint64 | float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := append([]T(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Bracket is one B run with the A runs around it in the run order.
type Bracket struct {
	B int `json:"b"`
	// Before and After are the nearest counted A runs on each side; -1
	// when there is none (a B at an end of the order).
	Before int `json:"a_before"`
	After  int `json:"a_after"`
}

// Refs are the indexes of the bracket's A runs (one or two).
func (b Bracket) Refs() []int {
	var out []int
	for _, i := range []int{b.Before, b.After} {
		if i >= 0 {
			out = append(out, i)
		}
	}
	return out
}

// Brackets pairs every counted B with the nearest counted A before and
// after it in the order given. isA and isB say what each position is;
// count says whether it takes part (failed, slow-mode and outlier runs do
// not). A B with no counted A on either side gets no bracket. Because
// each B is set against its own neighbours, a drift that is slow against
// one pair's span cancels out of the difference.
func Brackets(n int, isA, isB, count func(i int) bool) []Bracket {
	var out []Bracket
	for i := 0; i < n; i++ {
		if !isB(i) || !count(i) {
			continue
		}
		b := Bracket{B: i, Before: -1, After: -1}
		for j := i - 1; j >= 0; j-- {
			if isA(j) && count(j) {
				b.Before = j
				break
			}
		}
		for j := i + 1; j < n; j++ {
			if isA(j) && count(j) {
				b.After = j
				break
			}
		}
		if b.Before >= 0 || b.After >= 0 {
			out = append(out, b)
		}
	}
	return out
}

// RefMean is the mean of value over the bracket's A runs.
func (b Bracket) RefMean(value func(i int) float64) float64 {
	refs := b.Refs()
	var sum float64
	for _, i := range refs {
		sum += value(i)
	}
	return sum / float64(len(refs))
}

// MinMax gives the least and greatest of xs (0, 0 for none).
func MinMax[T int64 | float64](xs []T) (lo, hi T) {
	for i, x := range xs {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}

// madOutliers marks the values whose modified z-score (Iglewicz and
// Hoaglin: 0.6745·|x−median|/MAD) is over 3.5 and that also lie more than
// floor away from the median: with five runs the MAD of a quiet machine
// can be microseconds, and a run 0.3% off is no outlier.
func madOutliers(xs []float64, floor float64) []bool {
	out := make([]bool, len(xs))
	if len(xs) < 3 {
		return out
	}
	med := Median(xs)
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - med)
	}
	mad := Median(dev)
	for i, d := range dev {
		if d <= floor {
			continue
		}
		if mad == 0 || 0.6745*d/mad > 3.5 {
			out[i] = true
		}
	}
	return out
}

// theilSen fits a line through (x[i], y[i]) by the median of the slopes
// between every two points, and gives the slope and the line's value at
// x[0] (its intercept is the median of y − slope·x). It needs two points
// with different x.
func theilSen(x []int, y []float64) (slope, atFirst float64) {
	var slopes []float64
	for i := range x {
		for j := i + 1; j < len(x); j++ {
			if x[j] != x[i] {
				slopes = append(slopes, (y[j]-y[i])/float64(x[j]-x[i]))
			}
		}
	}
	slope = Median(slopes)
	rest := make([]float64, len(x))
	for i := range x {
		rest[i] = y[i] - slope*float64(x[i])
	}
	return slope, Median(rest) + slope*float64(x[0])
}
