package attribution

import "container/heap"

// Phase is a contiguous stretch of the run with one dominant category.
type Phase struct {
	StartNS  int64    `json:"start_ns"`
	EndNS    int64    `json:"end_ns"`
	Dominant Category `json:"dominant"`
	// Name is the phase's name for people: "load", "compile", "compute",
	// "download", "cpu" or "idle".
	Name string `json:"name"`
	// Split is the wall time inside the phase by category, in
	// [Categories] order, summing to EndNS-StartNS.
	Split []Share `json:"split"`
}

// phaseRun is a node of the doubly linked list phases are built on.
type phaseRun struct {
	start, end int64
	split      Split
	dom        int
	prev, next int // indexes, -1 at the ends
	alive      bool
	version    int
}

func (p *phaseRun) len() int64 { return p.end - p.start }

type heapEntry struct {
	length, start int64
	id, version   int
}

type runHeap []heapEntry

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if h[i].length != h[j].length {
		return h[i].length < h[j].length
	}
	return h[i].start < h[j].start
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(heapEntry)) }
func (h *runHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// phases groups slices into phases: adjacent slices with the same dominant
// category form a run; then, shortest first (earliest on a tie), every run
// shorter than minNS is absorbed into a neighbour — the one whose dominant
// category holds more of the short run's time, else the longer one, else
// the earlier — and neighbours left with the same dominant are joined. The
// phases stay contiguous and cover the slices exactly.
func phases(sl []Slice, minNS int64) []Phase {
	runs := make([]phaseRun, 0, len(sl))
	for _, s := range sl {
		if s.EndNS <= s.StartNS {
			continue
		}
		dom := s.Split.dominant()
		if n := len(runs); n > 0 && runs[n-1].dom == dom {
			runs[n-1].end = s.EndNS
			runs[n-1].split = addSplit(runs[n-1].split, s.Split)
			continue
		}
		runs = append(runs, phaseRun{start: s.StartNS, end: s.EndNS, split: s.Split, dom: dom, alive: true})
	}
	for i := range runs {
		runs[i].prev, runs[i].next = i-1, i+1
	}
	if n := len(runs); n > 0 {
		runs[n-1].next = -1
	}

	h := make(runHeap, 0, len(runs))
	for i, r := range runs {
		h = append(h, heapEntry{r.len(), r.start, i, 0})
	}
	heap.Init(&h)
	alive := len(runs)
	for alive > 1 && h.Len() > 0 {
		e := heap.Pop(&h).(heapEntry)
		k := &runs[e.id]
		if !k.alive || k.version != e.version {
			continue
		}
		if k.len() >= minNS {
			break
		}
		j := pickNeighbour(runs, e.id)
		absorb(runs, j, e.id)
		alive--
		// Join neighbours that now share j's dominant category.
		for joined := true; joined; {
			joined = false
			for _, n := range [...]int{runs[j].prev, runs[j].next} {
				if n >= 0 && runs[n].dom == runs[j].dom {
					absorb(runs, j, n)
					alive--
					joined = true
					break
				}
			}
		}
		runs[j].version++
		heap.Push(&h, heapEntry{runs[j].len(), runs[j].start, j, runs[j].version})
	}

	out := []Phase{}
	for i := firstAlive(runs); i >= 0; i = runs[i].next {
		r := runs[i]
		c := Categories[r.dom]
		out = append(out, Phase{StartNS: r.start, EndNS: r.end, Dominant: c, Name: c.PhaseName(), Split: r.split.shares()})
	}
	return out
}

func firstAlive(runs []phaseRun) int {
	for i := range runs {
		if runs[i].alive {
			for runs[i].prev >= 0 {
				i = runs[i].prev
			}
			return i
		}
	}
	return -1
}

func pickNeighbour(runs []phaseRun, k int) int {
	l, r := runs[k].prev, runs[k].next
	switch {
	case l < 0:
		return r
	case r < 0:
		return l
	}
	ls, rs := runs[k].split[runs[l].dom], runs[k].split[runs[r].dom]
	switch {
	case ls != rs:
		if ls > rs {
			return l
		}
		return r
	case runs[l].len() != runs[r].len():
		if runs[l].len() > runs[r].len() {
			return l
		}
		return r
	}
	return l
}

// absorb merges run k, a neighbour of j, into j.
func absorb(runs []phaseRun, j, k int) {
	rj, rk := &runs[j], &runs[k]
	rj.start, rj.end = min(rj.start, rk.start), max(rj.end, rk.end)
	rj.split = addSplit(rj.split, rk.split)
	rj.dom = rj.split.dominant()
	if rj.prev == k {
		rj.prev = rk.prev
		if rk.prev >= 0 {
			runs[rk.prev].next = j
		}
	} else {
		rj.next = rk.next
		if rk.next >= 0 {
			runs[rk.next].prev = j
		}
	}
	rk.alive = false
}

func addSplit(a, b Split) Split {
	for i := range a {
		a[i] += b[i]
	}
	return a
}
