package gpu

import (
	"cmp"
	"slices"
	"time"

	"github.com/coldtrace/coldtrace/record"
)

// seriesLimits size one device's series: the first HeadPolls polls are
// kept as taken (a minute at the default 100 ms: where a cold start's
// story is), then at most TailSlots coarse samples, each covering twice
// as many polls whenever the tail fills. An hour at 100 ms is 36,000
// polls a device; kept whole they cost some 3 MiB of memory and of record
// a device, and as much again for each process on it.
type seriesLimits struct {
	HeadPolls, TailSlots int
}

func defaultSeriesLimits() seriesLimits { return seriesLimits{HeadPolls: 600, TailSlots: 1200} }

// slot is one device sample of the series: one poll, or several merged.
type slot struct {
	at time.Duration // since the sampler's first poll
	// dt is the interval the slot covers, since the slot before it; 0 for
	// a device's first poll, the state before the run.
	dt    time.Duration
	polls int
	s     record.GPUSample
	// runMem is the traced processes' summed memory at the poll, the peak
	// of it over a merged slot's polls.
	runMem uint64
	procs  []procEntry // by pid
}

// procEntry is one GPU process in one slot.
type procEntry struct {
	pid       int32
	polls     int
	utilPolls int
	memKnown  bool
	mem       uint64 // the peak over the slot's polls
	smSum     uint64
	memSum    uint64
}

// series keeps one device's slots in bounded memory.
type series struct {
	lim    seriesLimits
	slots  []slot
	head   int // slots kept as taken
	pend   slot
	pendN  int
	stride int // polls a coarse slot takes
}

func newSeries(lim seriesLimits) *series {
	lim.HeadPolls = max(lim.HeadPolls, 1) // the first poll covers nothing: never merged
	lim.TailSlots = max(lim.TailSlots, 2)
	return &series{lim: lim, stride: 1}
}

func (r *series) add(sl slot) {
	if r.head < r.lim.HeadPolls {
		r.slots = append(r.slots, sl)
		r.head++
		return
	}
	if r.pendN == 0 {
		r.pend = sl
	} else {
		r.pend = mergeSlots(r.pend, sl)
	}
	r.pendN++
	if r.pendN >= r.stride {
		r.push(r.pend)
		r.pend, r.pendN = slot{}, 0
	}
}

func (r *series) push(sl slot) {
	r.slots = append(r.slots, sl)
	if len(r.slots)-r.head <= r.lim.TailSlots {
		return
	}
	j := r.head
	for i := r.head; i < len(r.slots); i += 2 {
		if i+1 < len(r.slots) {
			r.slots[j] = mergeSlots(r.slots[i], r.slots[i+1])
		} else {
			r.slots[j] = r.slots[i]
		}
		j++
	}
	clear(r.slots[j:])
	r.slots = r.slots[:j]
	r.stride *= 2
}

// each calls f for every slot in time order, the one being merged last.
func (r *series) each(f func(*slot)) {
	for i := range r.slots {
		f(&r.slots[i])
	}
	if r.pendN > 0 {
		p := r.pend
		f(&p)
	}
}

// mergeSlots sums two consecutive slots (a before b) into one covering
// both intervals. The exact sums go into the sample's coarse fields;
// the means beside them are for display.
func mergeSlots(a, b slot) slot {
	da, db := a.dt.Nanoseconds(), b.dt.Nanoseconds()
	sa, sb := a.s, b.s
	c := record.GPUSample{Device: sb.Device, Polls: a.polls + b.polls}
	c.UtilNS = sa.UtilCoveredNS(da) + sb.UtilCoveredNS(db)
	c.UtilSumPctNS = int64(sa.UtilPctNS(da) + sb.UtilPctNS(db))
	c.MemUtilSumPctNS = int64(sa.MemUtilPctNS(da) + sb.MemUtilPctNS(db))
	c.BusyNS = sa.BusyIn(da) + sb.BusyIn(db)
	c.UtilPeakPct = max(sa.UtilPeak(), sb.UtilPeak())
	if c.UtilNS > 0 {
		c.UtilGPUPct = uint32((c.UtilSumPctNS + c.UtilNS/2) / c.UtilNS)
		c.UtilMemPct = uint32((c.MemUtilSumPctNS + c.UtilNS/2) / c.UtilNS)
	} else {
		c.Absent = append(c.Absent, record.GPUFieldUtil, record.GPUFieldMemUtil)
	}
	switch {
	case sb.Has(record.GPUFieldMemUsed):
		c.MemUsedBytes = sb.MemUsedBytes
	case sa.Has(record.GPUFieldMemUsed):
		c.MemUsedBytes = sa.MemUsedBytes
	default:
		c.Absent = append(c.Absent, record.GPUFieldMemUsed)
	}
	if sa.Has(record.GPUFieldMemUsed) {
		c.MemPeakBytes = max(c.MemPeakBytes, sa.MemPeak())
	}
	if sb.Has(record.GPUFieldMemUsed) {
		c.MemPeakBytes = max(c.MemPeakBytes, sb.MemPeak())
	}
	c.SMClockMHz = cmp.Or(sb.SMClockMHz, sa.SMClockMHz)
	c.PowerMW = cmp.Or(sb.PowerMW, sa.PowerMW)

	out := slot{at: b.at, dt: a.dt + b.dt, polls: c.Polls, s: c, runMem: max(a.runMem, b.runMem)}
	out.procs = make([]procEntry, 0, max(len(a.procs), len(b.procs)))
	i, j := 0, 0
	for i < len(a.procs) || j < len(b.procs) {
		switch {
		case j == len(b.procs) || (i < len(a.procs) && a.procs[i].pid < b.procs[j].pid):
			out.procs = append(out.procs, a.procs[i])
			i++
		case i == len(a.procs) || b.procs[j].pid < a.procs[i].pid:
			out.procs = append(out.procs, b.procs[j])
			j++
		default:
			p, q := a.procs[i], b.procs[j]
			p.polls += q.polls
			p.utilPolls += q.utilPolls
			p.smSum += q.smSum
			p.memSum += q.memSum
			if q.memKnown {
				p.mem = max(p.mem, q.mem)
				p.memKnown = true
			}
			out.procs = append(out.procs, p)
			i++
			j++
		}
	}
	return out
}

// sortProcs orders a poll's entries by pid, as mergeSlots needs.
func sortProcs(ps []procEntry) {
	slices.SortFunc(ps, func(a, b procEntry) int { return cmp.Compare(a.pid, b.pid) })
}

// sample is the slot as the record holds it, at t.
func (sl *slot) sample(t int64) record.GPUSample {
	s := sl.s
	s.TNS = t
	if s.Coarse() {
		s.RunMemPeakBytes = sl.runMem
	}
	return s
}

// process is entry p of the slot as the record holds it, at t.
func (sl *slot) process(p procEntry, t int64) record.GPUProcessSample {
	out := record.GPUProcessSample{TNS: t, Device: sl.s.Device, PID: p.pid}
	if p.memKnown {
		m := p.mem
		out.MemUsedBytes = &m
	}
	if p.utilPolls > 0 {
		n := uint64(p.utilPolls)
		sm, mu := uint32((p.smSum+n/2)/n), uint32((p.memSum+n/2)/n)
		out.SMUtilPct, out.MemUtilPct = &sm, &mu
	}
	if sl.s.Coarse() {
		out.Polls, out.UtilPolls, out.SMUtilSumPct = p.polls, p.utilPolls, p.smSum
	}
	return out
}
