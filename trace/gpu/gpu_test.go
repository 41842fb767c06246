package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/coldtrace/coldtrace/record"
)

const (
	gib  = uint64(1) << 30
	step = 100 * time.Millisecond
)

// clock is a fake clock the tests advance by hand; step() moves it one
// polling interval on, and the scripted device funcs read the same index.
type clock struct {
	mu sync.Mutex
	t0 time.Time
	i  int
}

func newClock() *clock {
	return &clock{t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t0.Add(time.Duration(c.i) * step)
}

func (c *clock) idx() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.i
}

func (c *clock) next() {
	c.mu.Lock()
	c.i++
	c.mu.Unlock()
}

// micros is the NVML timestamp of step i, plus off µs.
func (c *clock) micros(i int, off uint64) uint64 {
	return uint64(c.t0.Add(time.Duration(i)*step).UnixMicro()) + off
}

// at returns v[i], or the last element past the end.
func at[T any](v []T, i int) T {
	if i >= len(v) {
		return v[len(v)-1]
	}
	return v[i]
}

// device is the mock's i-th device with its funcs reachable.
func mockDev(s *server.Server, i int) *server.Device {
	return s.Devices[i].(*server.Device)
}

// quiet makes every device of s answer every sampled call: an idle GPU
// with no processes, 1 GiB used, 1980 MHz, 70 W.
func quiet(s *server.Server) {
	for i := range s.Devices {
		d := mockDev(s, i)
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{}, nvml.SUCCESS
		}
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: d.MemoryInfo.Total, Used: gib, Free: d.MemoryInfo.Total - gib}, nvml.SUCCESS
		}
		d.GetClockInfoFunc = func(ct nvml.ClockType) (uint32, nvml.Return) {
			if ct != nvml.CLOCK_SM {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return 1980, nvml.SUCCESS
		}
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 70000, nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return nil, nvml.SUCCESS
		}
		d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return nil, nvml.SUCCESS
		}
		d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			// What the real library answers when there is no sample.
			return []nvml.ProcessUtilizationSample{}, nvml.ERROR_INSUFFICIENT_SIZE
		}
	}
}

func set(pids ...int32) func(int32) bool {
	m := map[int32]bool{}
	for _, p := range pids {
		m[p] = true
	}
	return func(pid int32) bool { return m[pid] }
}

func noComm(t *testing.T) func(int32) string {
	return func(pid int32) string {
		t.Errorf("Comm(%d) called", pid)
		return ""
	}
}

// run polls n times, one step apart, and returns the record with times
// relative to the first poll.
func run(s *Sampler, c *clock, n int) *record.GPU {
	start := c.Now()
	for range n {
		s.Sample()
		c.next()
	}
	return s.Result(start)
}

// TestTimeline scripts the seeds' VRAM story on GPU 0 of a DGX H100 and
// checks the samples and the summary.
func TestTimeline(t *testing.T) {
	srv := dgxh100.New()
	quiet(srv)
	c := newClock()
	util := []uint32{0, 50, 100, 0, 80}
	memUtil := []uint32{0, 10, 40, 0, 30}
	used := []uint64{1200 << 20, 5 * gib, 21800 << 20, 18300 << 20, 18300 << 20}
	d0 := mockDev(srv, 0)
	d0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: at(util, c.idx()), Memory: at(memUtil, c.idx())}, nvml.SUCCESS
	}
	d0.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		u := at(used, c.idx())
		return nvml.Memory{Total: d0.MemoryInfo.Total, Used: u, Free: d0.MemoryInfo.Total - u}, nvml.SUCCESS
	}
	d0.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 100000 + 100*at(util, c.idx()), nvml.SUCCESS }

	s := Open(srv, Options{Now: c.Now, Comm: noComm(t)})
	defer s.Close()
	if !s.Available() || s.Err() != nil || s.Unavailable() != "" {
		t.Fatalf("unavailable: %v", s.Err())
	}
	if s.Interval() != DefaultInterval {
		t.Errorf("interval %v, want %v", s.Interval(), DefaultInterval)
	}
	g := run(s, c, len(util))

	if len(g.Devices) != 8 {
		t.Fatalf("%d devices, want 8", len(g.Devices))
	}
	want0 := record.GPUDevice{Index: 0, Name: gpus.H100_SXM5_80GB.Name, UUID: d0.UUID, MemTotal: d0.MemoryInfo.Total}
	if got := g.Devices[0]; got.Index != want0.Index || got.Name != want0.Name || got.UUID != want0.UUID || got.MemTotal != want0.MemTotal || len(got.Unsupported) != 0 {
		t.Errorf("device 0 = %+v, want %+v", got, want0)
	}
	if g.IntervalNS != int64(DefaultInterval) {
		t.Errorf("interval_ns %d", g.IntervalNS)
	}
	if len(g.Samples) != 8*len(util) {
		t.Fatalf("%d samples, want %d", len(g.Samples), 8*len(util))
	}
	ss := g.DeviceSamples(0)
	for i, smp := range ss {
		want := record.GPUSample{
			TNS: int64(i) * int64(step), Device: 0,
			UtilGPUPct: util[i], UtilMemPct: memUtil[i], MemUsedBytes: used[i],
			SMClockMHz: 1980, PowerMW: 100000 + 100*util[i],
		}
		if smp.TNS != want.TNS || smp.UtilGPUPct != want.UtilGPUPct || smp.UtilMemPct != want.UtilMemPct ||
			smp.MemUsedBytes != want.MemUsedBytes || smp.SMClockMHz != want.SMClockMHz || smp.PowerMW != want.PowerMW ||
			len(smp.Absent) != 0 {
			t.Errorf("sample %d = %+v, want %+v", i, smp, want)
		}
		for _, f := range []string{record.GPUFieldUtil, record.GPUFieldMemUtil, record.GPUFieldMemUsed, record.GPUFieldSMClock, record.GPUFieldPower} {
			if !smp.Has(f) {
				t.Errorf("sample %d lacks %s", i, f)
			}
		}
	}
	if len(g.Processes) != 0 || len(g.Interference) != 0 || len(g.Warnings) != 0 {
		t.Errorf("processes %v, interference %v, warnings %v", g.Processes, g.Interference, g.Warnings)
	}

	sums := g.Summaries()
	if len(sums) != 8 {
		t.Fatalf("%d summaries", len(sums))
	}
	s0 := sums[0]
	if s0.Index != 0 || s0.Name != gpus.H100_SXM5_80GB.Name || s0.Samples != 5 {
		t.Errorf("summary 0 = %+v", s0)
	}
	if s0.UtilMeanPct != 57.5 || s0.UtilPeakPct != 100 {
		t.Errorf("util mean %v peak %v, want 57.5 100", s0.UtilMeanPct, s0.UtilPeakPct)
	}
	if s0.VRAMBeforeBytes != 1200<<20 || s0.VRAMPeakBytes != 21800<<20 || s0.VRAMEndBytes != 18300<<20 {
		t.Errorf("VRAM before %d peak %d end %d", s0.VRAMBeforeBytes, s0.VRAMPeakBytes, s0.VRAMEndBytes)
	}
	if s0.BusyNS != int64(3*step) {
		t.Errorf("busy %v, want %v", time.Duration(s0.BusyNS), 3*step)
	}
	if s0.RunSharePct != nil {
		t.Errorf("share %v with no process at all", *s0.RunSharePct)
	}
	if s1 := sums[1]; s1.BusyNS != 0 || s1.UtilPeakPct != 0 || s1.VRAMPeakBytes != gib {
		t.Errorf("idle GPU 1 summary %+v", s1)
	}

	// The JSON the report embeds.
	b, err := json.Marshal(s0)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"index", "name", "util_mean_pct", "util_peak_pct", "vram_before_bytes", "vram_peak_bytes", "vram_end_bytes", "busy_ns"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary JSON lacks %q: %s", k, b)
		}
	}

	// The record round-trips.
	b, err = json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var back record.GPU
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.Summaries()[0]; got.BusyNS != s0.BusyNS || got.UtilMeanPct != s0.UtilMeanPct || got.VRAMPeakBytes != s0.VRAMPeakBytes {
		t.Errorf("after JSON round trip %+v, want %+v", got, s0)
	}
}

// TestProcesses: traced processes become per-process samples, the others
// interference, whichever list (compute, graphics, utilization) shows them.
func TestProcesses(t *testing.T) {
	srv := dgxh200.New()
	quiet(srv)
	c := newClock()
	d0 := mockDev(srv, 0)
	const (
		run1   = 100 // traced from the start
		run2   = 101 // traced, appears at step 2
		late   = 102 // on the GPU at step 1, known to the tracer from step 3
		other  = 200 // untraced compute process
		gfx    = 300 // untraced graphics process, comm unreadable
		idleTr = 103 // traced, listed, never any utilization sample
	)
	var tracedMu sync.Mutex
	traced := map[int32]bool{run1: true, idleTr: true}
	d0.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		i := c.idx()
		ps := []nvml.ProcessInfo{
			{Pid: run1, UsedGpuMemory: uint64(i+1) * gib},
			{Pid: other, UsedGpuMemory: 2 * gib},
			{Pid: idleTr, UsedGpuMemory: notAvailable},
		}
		if i >= 1 {
			ps = append(ps, nvml.ProcessInfo{Pid: late, UsedGpuMemory: gib / 2})
		}
		if i >= 2 {
			ps = append(ps, nvml.ProcessInfo{Pid: run2, UsedGpuMemory: gib})
		}
		return ps, nvml.SUCCESS
	}
	d0.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: gfx, UsedGpuMemory: gib / 4},
			{Pid: run1, UsedGpuMemory: 1 << 20}, // also a graphics context
		}, nvml.SUCCESS
	}
	d0.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		i := c.idx()
		if i == 0 {
			return nil, nvml.ERROR_NOT_FOUND // no samples yet
		}
		return []nvml.ProcessUtilizationSample{
			{Pid: run1, TimeStamp: c.micros(i, 0) - 50_000, SmUtil: 40, MemUtil: 10},
			{Pid: run1, TimeStamp: c.micros(i, 0) - 10_000, SmUtil: 60, MemUtil: 20},
			{Pid: other, TimeStamp: c.micros(i, 0) - 20_000, SmUtil: 20, MemUtil: 5},
			{Pid: other, TimeStamp: last, SmUtil: 99, MemUtil: 99}, // already seen
			{Pid: 0, TimeStamp: 0}, // unused buffer entry
		}, nvml.SUCCESS
	}
	var commCalls []int32
	comm := func(pid int32) string {
		commCalls = append(commCalls, pid)
		if pid == other {
			return "python3"
		}
		return ""
	}
	s := Open(srv, Options{
		Now:  c.Now,
		Comm: comm,
		Traced: func(pid int32) bool {
			tracedMu.Lock()
			defer tracedMu.Unlock()
			return traced[pid]
		},
	})
	defer s.Close()
	start := c.Now()
	for i := range 5 {
		tracedMu.Lock()
		if i == 2 {
			traced[run2] = true
		}
		if i == 3 {
			traced[late] = true
		}
		tracedMu.Unlock()
		s.Sample()
		c.next()
	}
	g := s.Result(start)

	// lastSeen moves to the newest timestamp returned.
	calls := d0.GetProcessUtilizationCalls()
	if len(calls) != 5 {
		t.Fatalf("%d GetProcessUtilization calls", len(calls))
	}
	if calls[0].V != c.micros(0, 0) {
		t.Errorf("first lastSeen %d, want the start %d", calls[0].V, c.micros(0, 0))
	}
	for i := 2; i < 5; i++ {
		if want := c.micros(i-1, 0) - 10_000; calls[i].V != want {
			t.Errorf("call %d lastSeen %d, want %d", i, calls[i].V, want)
		}
	}

	byPID := map[int32][]record.GPUProcessSample{}
	for _, p := range g.Processes {
		if p.Device != 0 {
			t.Errorf("process sample on GPU %d: %+v", p.Device, p)
		}
		byPID[p.PID] = append(byPID[p.PID], p)
	}
	if len(byPID) != 4 {
		t.Errorf("traced pids %v, want %d %d %d %d", keys(byPID), run1, run2, late, idleTr)
	}
	r1 := byPID[run1]
	if len(r1) != 5 {
		t.Fatalf("%d samples of pid %d", len(r1), run1)
	}
	for i, p := range r1 {
		if p.TNS != int64(i)*int64(step) || p.MemUsedBytes == nil || *p.MemUsedBytes != uint64(i+1)*gib {
			t.Errorf("pid %d sample %d = %+v", run1, i, p)
		}
		if i == 0 {
			if p.SMUtilPct != nil {
				t.Errorf("utilization %d at step 0 with no samples", *p.SMUtilPct)
			}
			continue
		}
		if p.SMUtilPct == nil || *p.SMUtilPct != 50 || *p.MemUtilPct != 15 {
			t.Errorf("pid %d sample %d utilization %v/%v, want the mean 50/15", run1, i, p.SMUtilPct, p.MemUtilPct)
		}
	}
	if n := len(byPID[run2]); n != 3 {
		t.Errorf("%d samples of pid %d, want 3", n, run2)
	}
	if n := len(byPID[late]); n != 4 {
		t.Errorf("%d samples of pid %d, want 4 (traced late, still the run's)", n, late)
	}
	for _, p := range byPID[idleTr] {
		if p.MemUsedBytes != nil || p.SMUtilPct != nil {
			t.Errorf("pid %d: memory not available must be absent: %+v", idleTr, p)
		}
	}

	if len(g.Interference) != 2 {
		t.Fatalf("interference %+v, want pids %d and %d", g.Interference, other, gfx)
	}
	o, x := g.Interference[0], g.Interference[1]
	if o.PID != other || o.Name != "python3" || o.Device != 0 || o.Polls != 5 || o.FirstNS != 0 || o.LastNS != int64(4*step) ||
		o.MemPeakBytes != 2*gib || o.UtilPolls != 4 || o.SMUtilMeanPct != 20 || o.SMUtilPeakPct != 20 || o.MemUtilMeanPct != 5 {
		t.Errorf("interference[0] = %+v", o)
	}
	if x.PID != gfx || x.Name != "" || x.MemPeakBytes != gib/4 || x.UtilPolls != 0 {
		t.Errorf("interference[1] = %+v", x)
	}
	// Names are read once, for untraced processes only.
	if len(commCalls) != 3 || commCalls[0] != other && commCalls[0] != gfx {
		t.Errorf("Comm calls %v, want one each for %d, %d and %d (not yet traced at step 1)", commCalls, other, gfx, late)
	}
	for _, pid := range commCalls {
		if pid == run1 || pid == run2 || pid == idleTr {
			t.Errorf("Comm read the traced pid %d", pid)
		}
	}

	sum := g.Summaries()[0]
	// Traced util: pid 100 at 50% over 4 polls; other: 20% over 4 polls.
	if sum.RunSharePct == nil || math.Abs(*sum.RunSharePct-100*200.0/280) > 1e-9 || sum.ShareSource != "process_util" {
		t.Errorf("share %v (%s), want %.3f process_util", sum.RunSharePct, sum.ShareSource, 100*200.0/280)
	}
	// Peak of the run's memory: step 4: 5 GiB + 0.5 + 1.
	if want := 5*gib + gib/2 + gib; sum.RunVRAMPeakBytes != want {
		t.Errorf("run VRAM peak %d, want %d", sum.RunVRAMPeakBytes, want)
	}
	if on := g.InterferenceOn(0); len(on) != 2 {
		t.Errorf("InterferenceOn(0) = %v", on)
	}
	if on := g.InterferenceOn(1); len(on) != 0 {
		t.Errorf("InterferenceOn(1) = %v", on)
	}
	if sums := g.Summaries(); sums[1].RunSharePct != nil {
		t.Errorf("share on an unused GPU: %v", *sums[1].RunSharePct)
	}
}

func keys[V any](m map[int32]V) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSoleUser: without per-process utilization, a GPU used only by the
// run is the run's alone.
func TestSoleUser(t *testing.T) {
	srv := dgxh100.NewWithGPUs(gpus.H100_SXM5_80GB)
	quiet(srv)
	c := newClock()
	d0 := mockDev(srv, 0)
	d0.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: gib}}, nvml.SUCCESS
	}
	d0.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	s := Open(srv, Options{Now: c.Now, Traced: set(7), Comm: noComm(t)})
	defer s.Close()
	g := run(s, c, 3)
	sum := g.Summaries()[0]
	if sum.RunSharePct == nil || *sum.RunSharePct != 100 || sum.ShareSource != "sole_user" {
		t.Errorf("share %v %q, want 100 sole_user", sum.RunSharePct, sum.ShareSource)
	}
	if n := len(d0.GetProcessUtilizationCalls()); n != 1 {
		t.Errorf("GetProcessUtilization asked %d times after NOT_SUPPORTED, want 1", n)
	}
	if len(g.Warnings) != 0 {
		t.Errorf("warnings for an unsupported field: %v", g.Warnings)
	}
}

// TestNotSupported: fields a GPU does not support are absent, asked once,
// and the rest goes on; other errors cost one sample and leave a warning.
func TestNotSupported(t *testing.T) {
	srv := dgxh200.NewWithGPUs(gpus.H200_SXM5_141GB, gpus.H200_SXM5_141GB)
	quiet(srv)
	c := newClock()
	d0, d1 := mockDev(srv, 0), mockDev(srv, 1)
	d0.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d0.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }
	d0.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 30, Memory: 3}, nvml.SUCCESS
	}
	d0.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if c.idx() == 1 {
			return nvml.Memory{}, nvml.ERROR_UNKNOWN
		}
		return nvml.Memory{Total: 141 * gib, Used: 3 * gib}, nvml.SUCCESS
	}
	// GPU 1 reports no utilization at all (as under MIG).
	d1.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }

	s := Open(srv, Options{Now: c.Now, Comm: noComm(t)})
	defer s.Close()
	g := run(s, c, 4)

	if got := g.Devices[0].Unsupported; strings.Join(got, ",") != "sm_clock_mhz,power_mw" {
		t.Errorf("GPU 0 unsupported %v", got)
	}
	if got := g.Devices[1].Unsupported; strings.Join(got, ",") != "util,mem_util" {
		t.Errorf("GPU 1 unsupported %v", got)
	}
	if n := len(d0.GetPowerUsageCalls()); n != 1 {
		t.Errorf("power asked %d times after NOT_SUPPORTED, want 1", n)
	}
	if n := len(d0.GetGraphicsRunningProcessesCalls()); n != 1 {
		t.Errorf("graphics processes asked %d times, want 1", n)
	}
	if n := len(d0.GetComputeRunningProcessesCalls()); n != 4 {
		t.Errorf("compute processes asked %d times, want 4", n)
	}
	for i, smp := range g.DeviceSamples(0) {
		if smp.Has(record.GPUFieldPower) || smp.Has(record.GPUFieldSMClock) {
			t.Errorf("GPU 0 sample %d has power or clock: %+v", i, smp)
		}
		if !smp.Has(record.GPUFieldUtil) || smp.UtilGPUPct != 30 {
			t.Errorf("GPU 0 sample %d lost its utilization: %+v", i, smp)
		}
		if got := smp.Has(record.GPUFieldMemUsed); got != (i != 1) {
			t.Errorf("GPU 0 sample %d has mem_used %v", i, got)
		}
	}
	for i, smp := range g.DeviceSamples(1) {
		if smp.Has(record.GPUFieldUtil) || smp.Has(record.GPUFieldMemUtil) || !smp.Has(record.GPUFieldMemUsed) || !smp.Has(record.GPUFieldPower) {
			t.Errorf("GPU 1 sample %d = %+v", i, smp)
		}
	}
	if len(g.Warnings) != 1 || !strings.HasPrefix(g.Warnings[0], "GPU 0: memory: ") {
		t.Errorf("warnings %q, want one for GPU 0 memory", g.Warnings)
	}
	sums := g.Summaries()
	if sums[0].UtilMeanPct != 30 || sums[0].BusyNS != int64(3*step) || sums[0].VRAMEndBytes != 3*gib {
		t.Errorf("GPU 0 summary %+v", sums[0])
	}
	if sums[1].UtilMeanPct != 0 || sums[1].BusyNS != 0 || strings.Join(sums[1].Unsupported, ",") != "util,mem_util" {
		t.Errorf("GPU 1 summary %+v", sums[1])
	}
}

// TestAbsent: a failed Init is "no NVIDIA GPU (…)", everything is a no-op,
// and Shutdown is never called.
func TestAbsent(t *testing.T) {
	for ret, want := range map[nvml.Return]string{
		nvml.ERROR_LIBRARY_NOT_FOUND: "no NVIDIA GPU (libnvidia-ml.so.1 not found)",
		nvml.ERROR_DRIVER_NOT_LOADED: "no NVIDIA GPU (NVIDIA driver not loaded)",
		nvml.ERROR_NO_PERMISSION:     "no NVIDIA GPU (no permission to use the NVIDIA driver)",
		nvml.ERROR_UNKNOWN:           "no NVIDIA GPU (NVML init: ERROR_UNKNOWN)",
	} {
		t.Run(want, func(t *testing.T) {
			srv := dgxh100.New()
			srv.InitFunc = func() nvml.Return { return ret }
			srv.ShutdownFunc = func() nvml.Return {
				t.Error("Shutdown called after a failed Init")
				return nvml.SUCCESS
			}
			s := Open(srv, Options{})
			if s.Available() {
				t.Fatal("available")
			}
			if got := s.Unavailable(); got != want {
				t.Errorf("Unavailable() = %q, want %q", got, want)
			}
			if err := s.Err(); !errors.Is(err, ErrNotAvailable) || err.Error() != want {
				t.Errorf("Err() = %v", err)
			}
			s.Start(context.Background())
			s.Sample()
			s.Stop()
			g := s.Result(time.Now())
			if g.Unavailable != want || len(g.Devices) != 0 || len(g.Samples) != 0 || g.Summaries() != nil {
				t.Errorf("result %+v", g)
			}
			for range 2 {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
			if n := len(srv.ShutdownCalls()); n != 0 {
				t.Errorf("Shutdown called %d times", n)
			}
			if n := len(srv.DeviceGetCountCalls()); n != 0 {
				t.Errorf("DeviceGetCount called %d times after a failed Init", n)
			}
			b, _ := json.Marshal(g)
			if !strings.Contains(string(b), `"unavailable":"no NVIDIA GPU (`) {
				t.Errorf("JSON %s", b)
			}
		})
	}
}

// TestNoDevices: Init worked, so Close shuts down, once.
func TestNoDevices(t *testing.T) {
	srv := dgxh100.NewWithGPUs()
	s := Open(srv, Options{})
	if got := s.Unavailable(); got != "no NVIDIA GPU (no devices)" {
		t.Errorf("Unavailable() = %q", got)
	}
	s.Close()
	s.Close()
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
}

// TestNilLibrary: no library at all is unavailable too.
func TestNilLibrary(t *testing.T) {
	s := Open(nil, Options{})
	if !errors.Is(s.Err(), ErrNotAvailable) {
		t.Errorf("Err() = %v", s.Err())
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// TestStartStop runs the real polling loop on the mock.
func TestStartStop(t *testing.T) {
	srv := dgxh100.NewWithGPUs(gpus.H100_SXM5_80GB, gpus.H100_SXM5_80GB)
	quiet(srv)
	s := Open(srv, Options{Interval: 2 * time.Millisecond, Traced: set()})
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Start(ctx)
	s.Start(ctx) // second Start is a no-op
	time.Sleep(30 * time.Millisecond)
	s.Stop()
	g := s.Result(start)
	n := len(g.DeviceSamples(0))
	if n < 3 {
		t.Errorf("%d samples of GPU 0 in 30 ms at 2 ms", n)
	}
	if len(g.DeviceSamples(1)) != n {
		t.Errorf("GPU 1 has %d samples, GPU 0 %d", len(g.DeviceSamples(1)), n)
	}
	s.Stop()
	if got := len(s.Result(start).Samples); got != len(g.Samples) {
		t.Errorf("samples after Stop: %d, want %d", got, len(g.Samples))
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
	s.Start(ctx) // after Close: nothing
	s.Sample()
	s.Stop()
	if got := len(s.Result(start).Samples); got != len(g.Samples) {
		t.Errorf("sampled after Close: %d samples, want %d", got, len(g.Samples))
	}
}

// TestCtxEnds: the loop ends with its context; Stop still samples last.
func TestCtxEnds(t *testing.T) {
	srv := dgxh100.NewWithGPUs(gpus.H100_SXM5_80GB)
	quiet(srv)
	s := Open(srv, Options{Interval: time.Hour})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)
	cancel()
	s.Stop()
	if n := len(s.Result(time.Now()).Samples); n != 2 {
		t.Errorf("%d samples, want the first and the last", n)
	}
}

// TestRealLibraryAbsent: the real nvml.New() on a machine without
// libnvidia-ml.so.1 says so and does not crash (Shutdown is not called).
func TestRealLibraryAbsent(t *testing.T) {
	s := Open(nvml.New(), Options{})
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if s.Available() {
		t.Skip("this machine has an NVIDIA GPU; see TestRealGPU")
	}
	got := s.Unavailable()
	if !strings.HasPrefix(got, "no NVIDIA GPU (") {
		t.Errorf("Unavailable() = %q", got)
	}
	t.Logf("%s", got)
	s.Start(context.Background())
	s.Stop()
	if g := s.Result(time.Now()); g.Unavailable != got {
		t.Errorf("result %+v", g)
	}
}

// TestProcComm reads this process's own name.
func TestProcComm(t *testing.T) {
	if got := procComm(int32(os.Getpid())); got == "" || strings.Contains(got, "\n") {
		t.Errorf("own comm %q", got)
	}
	if procComm(int32(1<<30)) != "" {
		t.Error("name of a pid that cannot exist")
	}
	if !descends(int32(os.Getpid()), int32(os.Getppid())) || descends(int32(os.Getppid()), int32(os.Getpid())) {
		t.Error("descends")
	}
}
