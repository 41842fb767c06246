package gpu

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/coldtrace/coldtrace/record"
)

// busyScript drives every device of srv through a long, uneven run: util
// and memory that change every poll (a hash of the step), utilization
// that fails now and then, a traced process on every device, a second
// one for part of the run, and an untraced one.
func busyScript(srv *server.Server, c *clock) {
	quiet(srv)
	h := func(i, dev, salt int) uint64 {
		x := uint64(i*131+dev*7+salt) * 0x9e3779b97f4a7c15
		return x >> 40
	}
	for dev := range srv.Devices {
		d := mockDev(srv, dev)
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			i := c.idx()
			if (i+dev)%97 == 0 {
				return nvml.Utilization{}, nvml.ERROR_UNKNOWN
			}
			u := uint32(h(i, dev, 1) % 101)
			if (i/50)%3 == 0 {
				u = 0 // idle stretches, so busy time differs from the covered time
			}
			return nvml.Utilization{Gpu: u, Memory: uint32(h(i, dev, 2) % 101)}, nvml.SUCCESS
		}
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			i := c.idx()
			if (i+dev)%89 == 0 {
				return nvml.Memory{}, nvml.ERROR_UNKNOWN
			}
			used := gib + h(i, dev, 3)%(8*gib)
			return nvml.Memory{Total: d.MemoryInfo.Total, Used: used, Free: d.MemoryInfo.Total - used}, nvml.SUCCESS
		}
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			i := c.idx()
			ps := []nvml.ProcessInfo{
				{Pid: 100, UsedGpuMemory: gib + h(i, dev, 4)%(4*gib)},
				{Pid: 200, UsedGpuMemory: h(i, dev, 5) % gib},
			}
			if i%700 > 300 {
				ps = append(ps, nvml.ProcessInfo{Pid: 101, UsedGpuMemory: h(i, dev, 6) % (2 * gib)})
			}
			return ps, nvml.SUCCESS
		}
		d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			i := c.idx()
			if i%5 == 0 {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return []nvml.ProcessUtilizationSample{
				{Pid: 100, TimeStamp: c.micros(i, 0) - 30_000, SmUtil: uint32(h(i, dev, 7) % 101)},
				{Pid: 200, TimeStamp: c.micros(i, 0) - 20_000, SmUtil: uint32(h(i, dev, 8) % 101)},
			}, nvml.SUCCESS
		}
	}
}

// A long run's samples are coarsened in bounded memory, and everything
// read from them (summaries, busy time, the run's share and memory, the
// untraced processes, pprof's weights) is what the polls kept whole give.
func TestCoarsenedKeepsTotals(t *testing.T) {
	const polls = 5000
	lim := seriesLimits{HeadPolls: 60, TailSlots: 50}
	c := newClock()
	whole, coarse := dgxh100.New(), dgxh100.New()
	busyScript(whole, c)
	busyScript(coarse, c)
	opts := Options{Now: c.Now, Traced: set(100, 101), Comm: func(int32) string { return "other" }}
	sw, sc := Open(whole, opts), Open(coarse, opts)
	defer sw.Close()
	defer sc.Close()
	for _, d := range sw.devices {
		d.series = newSeries(seriesLimits{HeadPolls: polls + 1})
	}
	for _, d := range sc.devices {
		d.series = newSeries(lim)
	}
	start := c.Now()
	for range polls {
		sw.Sample()
		sc.Sample()
		c.next()
	}
	gw, gc := sw.Result(start), sc.Result(start)

	if n := len(gw.DeviceSamples(0)); n != polls {
		t.Fatalf("the whole series holds %d samples of GPU 0, want %d", n, polls)
	}
	ss := gc.DeviceSamples(0)
	if len(ss) > lim.HeadPolls+lim.TailSlots+1 || len(ss) < lim.HeadPolls+lim.TailSlots/2 {
		t.Errorf("the coarse series holds %d samples of GPU 0, want %d at most", len(ss), lim.HeadPolls+lim.TailSlots+1)
	}
	var polled int
	for i, s := range ss {
		polled += max(s.Polls, 1)
		if i < lim.HeadPolls && s.Coarse() {
			t.Errorf("sample %d of the head is coarse: %+v", i, s)
		}
	}
	if polled != polls {
		t.Errorf("the coarse samples stand for %d polls, want %d", polled, polls)
	}
	if last, want := ss[len(ss)-1].TNS, int64(polls-1)*int64(step); last != want {
		t.Errorf("the last coarse sample at %d, want the last poll's %d", last, want)
	}
	if len(gc.Processes) >= len(gw.Processes)/10 {
		t.Errorf("%d process entries coarse, %d whole", len(gc.Processes), len(gw.Processes))
	}

	// Through the JSON too: what a report reads.
	b, err := json.Marshal(gc)
	if err != nil {
		t.Fatal(err)
	}
	var decoded record.GPU
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*record.GPU{"in memory": gc, "decoded": &decoded} {
		want, got := gw.Summaries(), g.Summaries()
		if len(got) != len(want) {
			t.Fatalf("%s: %d summaries, want %d", name, len(got), len(want))
		}
		for i := range want {
			w, g := want[i], got[i]
			if math.Abs(w.UtilMeanPct-g.UtilMeanPct) > 1e-9 || w.Samples != g.Samples || w.Samples != polls || w.UtilPeakPct != g.UtilPeakPct || w.BusyNS != g.BusyNS ||
				w.VRAMBeforeBytes != g.VRAMBeforeBytes || w.VRAMPeakBytes != g.VRAMPeakBytes || w.VRAMEndBytes != g.VRAMEndBytes ||
				w.RunVRAMPeakBytes != g.RunVRAMPeakBytes || w.RunSharePct == nil || g.RunSharePct == nil ||
				math.Abs(*w.RunSharePct-*g.RunSharePct) > 1e-9 || w.ShareSource != g.ShareSource {
				t.Errorf("%s: GPU %d summary\n got %+v\nwant %+v", name, i, g, w)
			}
		}
		if !reflect.DeepEqual(g.Interference, gw.Interference) {
			t.Errorf("%s: interference\n got %+v\nwant %+v", name, g.Interference, gw.Interference)
		}
		for dev := range gw.Devices {
			if a, b := utilIntegral(gw.DeviceSamples(dev)), utilIntegral(g.DeviceSamples(dev)); a != b {
				t.Errorf("%s: GPU %d busy integral %.0f, want %.0f", name, dev, b, a)
			}
		}
		if a, b := processWeights(gw), processWeights(g); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: per-process polls and SM sums %v, want %v", name, b, a)
		}
	}
	sum := gw.Summaries()[0]
	t.Logf("GPU 0: %d polls in %d samples, %d process entries (whole: %d); mean %.2f%%, peak %d%%, busy %.1f s, run share %.1f%%",
		polls, len(ss), len(gc.Processes), len(gw.Processes), sum.UtilMeanPct, sum.UtilPeakPct, float64(sum.BusyNS)/1e9, *sum.RunSharePct)
}

func utilIntegral(ss []record.GPUSample) float64 {
	var v float64
	for i := 1; i < len(ss); i++ {
		v += ss[i].UtilPctNS(ss[i].TNS - ss[i-1].TNS)
	}
	return v
}

type weight struct {
	polls int
	sm    uint64
	util  int
}

func processWeights(g *record.GPU) map[[2]int32]weight {
	out := map[[2]int32]weight{}
	for _, p := range g.Processes {
		k := [2]int32{int32(p.Device), p.PID}
		w := out[k]
		w.polls += p.PollCount()
		w.sm += p.SMUtilSum()
		switch {
		case p.Coarse():
			w.util += p.UtilPolls
		case p.SMUtilPct != nil:
			w.util++
		}
		out[k] = w
	}
	return out
}

// Merging keeps what the polls said: a poll without a reading does not
// count as idle in the mean, a memory reading survives a poll that had
// none, and the peaks are the polls'.
func TestMergeSlots(t *testing.T) {
	a := slot{at: 100, dt: 100, polls: 1, runMem: 5,
		s:     record.GPUSample{Device: 1, UtilGPUPct: 80, UtilMemPct: 40, MemUsedBytes: 7 * gib, SMClockMHz: 1500, PowerMW: 300},
		procs: []procEntry{{pid: 1, polls: 1, utilPolls: 1, smSum: 60, memSum: 10, memKnown: true, mem: 3}, {pid: 3, polls: 1, memKnown: true, mem: 9}}}
	b := slot{at: 400, dt: 300, polls: 1, runMem: 4,
		s:     record.GPUSample{Device: 1, Absent: []string{record.GPUFieldUtil, record.GPUFieldMemUtil, record.GPUFieldMemUsed}},
		procs: []procEntry{{pid: 1, polls: 1, memKnown: true, mem: 2}, {pid: 2, polls: 1, utilPolls: 1, smSum: 10}}}
	m := mergeSlots(a, b)
	s := m.sample(400)
	if !s.Coarse() || s.Polls != 2 || m.dt != 400 || m.at != 400 {
		t.Errorf("merged slot %+v", m)
	}
	if s.UtilGPUPct != 80 || s.UtilMemPct != 40 || s.UtilCoveredNS(400) != 100 || s.UtilPctNS(400) != 8000 || s.BusyIn(400) != 100 {
		t.Errorf("util over the polls that had it: %+v", s)
	}
	if !s.Has(record.GPUFieldMemUsed) || s.MemUsedBytes != 7*gib || s.MemPeak() != 7*gib || s.RunMemPeakBytes != 5 {
		t.Errorf("memory: %+v", s)
	}
	if s.SMClockMHz != 1500 || s.PowerMW != 300 {
		t.Errorf("clock and power are the last known: %+v", s)
	}
	want := []procEntry{
		{pid: 1, polls: 2, utilPolls: 1, smSum: 60, memSum: 10, memKnown: true, mem: 3},
		{pid: 2, polls: 1, utilPolls: 1, smSum: 10},
		{pid: 3, polls: 1, memKnown: true, mem: 9},
	}
	if !reflect.DeepEqual(m.procs, want) {
		t.Errorf("processes %+v, want %+v", m.procs, want)
	}
	p := m.process(m.procs[0], 400)
	if p.SMUtilSum() != 60 || p.UtilPolls != 1 || p.PollCount() != 2 || *p.SMUtilPct != 60 || *p.MemUsedBytes != 3 {
		t.Errorf("process entry %+v", p)
	}

	// Two polls without util stay without it.
	bb := mergeSlots(b, b)
	none := bb.sample(700)
	if none.Has(record.GPUFieldUtil) || none.UtilCoveredNS(600) != 0 || none.Has(record.GPUFieldMemUsed) {
		t.Errorf("no readings: %+v", none)
	}
}
