package attribution

import (
	"math"
	"sort"
)

// tally accumulates float weights per key, remembering first-insertion
// order so that every later step is deterministic without sorting keys of
// unknown type.
type tally[K comparable] struct {
	idx  map[K]int
	keys []K
	vals []float64
}

func (t *tally[K]) add(k K, v float64) {
	if v <= 0 {
		return
	}
	if t.idx == nil {
		t.idx = make(map[K]int)
	}
	i, ok := t.idx[k]
	if !ok {
		i = len(t.keys)
		t.idx[k] = i
		t.keys = append(t.keys, k)
		t.vals = append(t.vals, 0)
	}
	t.vals[i] += v
}

func (t *tally[K]) reset() {
	clear(t.idx)
	t.keys = t.keys[:0]
	t.vals = t.vals[:0]
}

func (t *tally[K]) sum() float64 {
	var s float64
	for _, v := range t.vals {
		s += v
	}
	return s
}

func (t *tally[K]) get(k K) float64 {
	if i, ok := t.idx[k]; ok {
		return t.vals[i]
	}
	return 0
}

// spread adds amount to dst, split over t's keys in proportion to their
// weights.
func (t *tally[K]) spread(dst *tally[K], amount int64) {
	s := t.sum()
	if amount <= 0 || s <= 0 {
		return
	}
	for i, k := range t.keys {
		dst.add(k, float64(amount)*t.vals[i]/s)
	}
}

// allot turns the weights into integers that sum to exactly total, by
// largest remainder (ties to the earlier key). It returns one value per
// key, in key order.
func (t *tally[K]) allot(total int64) []int64 {
	return Apportion(t.vals, total)
}

// Apportion splits total over weights in proportion, in integers summing
// exactly to total; leftover units go to the largest fractional parts,
// ties to the earlier index. With no positive weight it returns zeros; a
// negative total is split as its magnitude, negated. The renderers use it
// too, so every view of a run adds up to the same nanoseconds.
func Apportion(weights []float64, total int64) []int64 {
	out := make([]int64, len(weights))
	if total < 0 {
		for i, v := range Apportion(weights, -total) {
			out[i] = -v
		}
		return out
	}
	var s float64
	for _, w := range weights {
		if w > 0 {
			s += w
		}
	}
	if total <= 0 || s <= 0 {
		return out
	}
	frac := make([]float64, len(weights))
	var given int64
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		exact := float64(total) * w / s
		f := math.Floor(exact)
		out[i] = int64(f)
		frac[i] = exact - f
		given += out[i]
	}
	order := make([]int, 0, len(weights))
	for i, w := range weights {
		if w > 0 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return frac[order[a]] > frac[order[b]] })
	// Float error can leave the floors a unit off in either direction;
	// the walks below make the sum exact.
	for n := 0; given < total; n++ {
		out[order[n%len(order)]]++
		given++
	}
	for n := len(order) - 1; given > total; n-- {
		i := order[(n%len(order)+len(order))%len(order)]
		if out[i] > 0 {
			out[i]--
			given--
		}
	}
	return out
}
