package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/coldtrace/coldtrace/record"
)

// notAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned long long.
const notAvailable = ^uint64(0)

// DefaultInterval is the polling period when Options.Interval is zero.
const DefaultInterval = 100 * time.Millisecond

// ErrNotAvailable is wrapped by Sampler.Err when there is no usable NVIDIA
// GPU: no libnvidia-ml.so.1, no driver, no device, or Init failed.
var ErrNotAvailable = errors.New("no NVIDIA GPU")

// Options configure a Sampler. The zero value is usable.
type Options struct {
	// Interval is the polling period (DefaultInterval when zero).
	Interval time.Duration
	// Traced says whether pid (a host pid, as NVML reports it) belongs to
	// the traced run. It is called from the sampling goroutine while the
	// run goes on, and once more per GPU process from Result, so it must be
	// safe for concurrent use and should answer true for every pid that
	// was ever part of the run, exited ones included. It is called with the
	// sampler's lock held: it must not wait for a lock its caller holds
	// while calling the Sampler. Nil: nothing traced.
	Traced func(pid int32) bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Comm names a process (reads /proc/PID/comm when nil); "" when unknown.
	Comm func(pid int32) string
	// NVML is the library the session's sensor (New) samples through
	// (nvml.New() when nil); Open takes its own.
	NVML nvml.Interface
}

// Sampler polls NVML. Its methods are safe for concurrent use.
type Sampler struct {
	lib      nvml.Interface
	opts     Options
	inited   bool // Init succeeded: Close must Shutdown
	closed   bool
	reason   string // non-empty: unavailable
	devices  []*device
	interval time.Duration

	mu      sync.Mutex
	shut    bool      // Close ran: NVML must not be called again
	base    time.Time // the first poll (zero before it): slots' times count from it
	lim     seriesLimits
	procs   map[procKey]*procTrack
	names   map[int32]string
	errs    map[string]*softErr
	errKeys []string

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

type device struct {
	index       int
	handle      nvml.Device
	info        record.GPUDevice
	unsupported map[string]bool
	lastSeen    uint64 // NVML process utilization timestamp, µs
	series      *series
	lastAt      time.Duration // the previous poll, since the base
	polled      bool
	// pollAt is the time of the poll under way; lostAt and lost (the
	// reason) are set when NVML said the GPU is lost: it is not polled
	// again and its series ends at the poll before.
	pollAt time.Time
	lostAt time.Time
	lost   string
}

type procKey struct {
	dev int
	pid int32
}

// procTrack is what is kept of one GPU process on one device besides
// its entries in the device's series: whether it is the run's, and the
// sums an untraced one is reported by.
type procTrack struct {
	tracedEver   bool
	first, last  time.Time
	polls        int
	memPeak      uint64
	utilPolls    int
	smSum, muSum float64
	smPeak       uint32
}

type softErr struct {
	msg   string
	count int
}

// Open initialises NVML through lib (nvml.New() in production) and finds
// the devices. It never fails: without a GPU the sampler is unavailable
// (Err, Unavailable) and its other methods do nothing.
func Open(lib nvml.Interface, opts Options) *Sampler {
	s := &Sampler{
		lib:      lib,
		opts:     opts,
		interval: opts.Interval,
		procs:    map[procKey]*procTrack{},
		lim:      defaultSeriesLimits(),
		names:    map[int32]string{},
		errs:     map[string]*softErr{},
	}
	if s.interval <= 0 {
		s.interval = DefaultInterval
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.opts.Comm == nil {
		s.opts.Comm = procComm
	}
	if lib == nil {
		s.reason = "no NVML library"
		return s
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		// Never Shutdown after a failed Init: with the library missing it
		// kills the process ("undefined symbol: nvmlShutdown").
		s.reason = initReason(ret)
		return s
	}
	s.inited = true
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.reason = "device count: " + retString(ret)
		return s
	}
	if n == 0 {
		s.reason = "no devices"
		return s
	}
	start := uint64(s.opts.Now().UnixMicro())
	for i := range n {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			s.soft(fmt.Sprintf("GPU %d: handle", i), ret)
			continue
		}
		d := &device{
			index:       i,
			handle:      h,
			info:        record.GPUDevice{Index: i},
			unsupported: map[string]bool{},
			lastSeen:    start,
		}
		d.series = newSeries(s.lim)
		if name, ret := h.GetName(); ret == nvml.SUCCESS {
			d.info.Name = name
		} else {
			d.info.Name = fmt.Sprintf("GPU %d", i)
		}
		if uuid, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.info.UUID = uuid
		}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.info.MemTotal = mem.Total
		}
		s.devices = append(s.devices, d)
	}
	if len(s.devices) == 0 {
		s.reason = fmt.Sprintf("none of %d devices could be opened", n)
	}
	return s
}

// initReason words a failed Init for "no NVIDIA GPU (…)".
func initReason(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA driver not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to use the NVIDIA driver"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "NVML library and driver versions differ"
	}
	return "NVML init: " + retString(ret)
}

// retString names an NVML return. Call it only while NVML is loaded or
// was never loaded, not after Shutdown.
func retString(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED:
		return "not supported"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission"
	case nvml.ERROR_GPU_IS_LOST:
		return "GPU is lost"
	}
	// While the library is loaded this asks it (nvmlErrorString); else
	// go-nvml's own table answers.
	return ret.Error()
}

// unsupported reports returns that mean the device will never answer.
func unsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// Available says whether there is at least one GPU to sample.
func (s *Sampler) Available() bool { return s.reason == "" }

// Unavailable is "" when a GPU is sampled, else "no NVIDIA GPU (reason)".
func (s *Sampler) Unavailable() string {
	if s.reason == "" {
		return ""
	}
	return fmt.Sprintf("%v (%s)", ErrNotAvailable, s.reason)
}

// Err is nil when a GPU is sampled, else an error wrapping ErrNotAvailable
// whose text is Unavailable().
func (s *Sampler) Err() error {
	if s.reason == "" {
		return nil
	}
	return fmt.Errorf("%w (%s)", ErrNotAvailable, s.reason)
}

// Interval is the polling period in use.
func (s *Sampler) Interval() time.Duration { return s.interval }

// Start takes a first sample now and then polls every Interval in a
// goroutine until Stop is called or ctx ends. It does nothing when the
// sampler is unavailable or already started.
func (s *Sampler) Start(ctx context.Context) {
	if !s.Available() {
		return
	}
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.done != nil || s.closed {
		return
	}
	s.Sample()
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.Sample()
			}
		}
	}()
}

// Stop ends the polling started by Start and takes a last sample, so the
// timeline reaches the end of the run. It is safe to call more than once
// and without Start.
func (s *Sampler) Stop() {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.done == nil {
		return
	}
	s.cancel()
	<-s.done
	s.done = nil
	if !s.closed {
		s.Sample()
	}
}

// Close stops the polling and shuts NVML down when Init succeeded; never
// otherwise. It is idempotent.
func (s *Sampler) Close() error {
	s.Stop()
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.mu.Lock()
	s.shut = true
	s.mu.Unlock()
	if !s.inited {
		return nil
	}
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", retString(ret))
	}
	return nil
}

// Sample polls every device once at the clock's now. Start calls it; tests
// and callers with their own loop may call it directly. After Close it does
// nothing.
func (s *Sampler) Sample() {
	if !s.Available() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return
	}
	now := s.opts.Now()
	if s.base.IsZero() {
		s.base = now
	}
	for _, d := range s.devices {
		s.sampleDevice(d, now)
	}
}

func (s *Sampler) sampleDevice(d *device, now time.Time) {
	if d.lost != "" {
		return
	}
	d.pollAt = now
	smp := record.GPUSample{Device: d.index}
	absent := func(field string) { smp.Absent = append(smp.Absent, field) }

	if !d.unsupported[record.GPUFieldUtil] {
		u, ret := d.handle.GetUtilizationRates()
		if s.check(d, ret, "utilization", record.GPUFieldUtil, record.GPUFieldMemUtil) {
			smp.UtilGPUPct, smp.UtilMemPct = u.Gpu, u.Memory
		} else {
			absent(record.GPUFieldUtil)
			absent(record.GPUFieldMemUtil)
		}
	} else {
		absent(record.GPUFieldUtil)
		absent(record.GPUFieldMemUtil)
	}
	if !d.unsupported[record.GPUFieldMemUsed] {
		m, ret := d.handle.GetMemoryInfo()
		if s.check(d, ret, "memory", record.GPUFieldMemUsed) {
			smp.MemUsedBytes = m.Used
			if d.info.MemTotal == 0 {
				d.info.MemTotal = m.Total
			}
		} else {
			absent(record.GPUFieldMemUsed)
		}
	} else {
		absent(record.GPUFieldMemUsed)
	}
	if !d.unsupported[record.GPUFieldSMClock] {
		c, ret := d.handle.GetClockInfo(nvml.CLOCK_SM)
		if s.check(d, ret, "SM clock", record.GPUFieldSMClock) {
			smp.SMClockMHz = c
		}
	}
	if !d.unsupported[record.GPUFieldPower] {
		p, ret := d.handle.GetPowerUsage()
		if s.check(d, ret, "power", record.GPUFieldPower) {
			smp.PowerMW = p
		}
	}
	procs, runMem := s.sampleProcesses(d, now)
	if d.lost != "" {
		return // the poll that found the GPU lost holds nothing
	}
	at := now.Sub(s.base)
	sl := slot{at: at, polls: 1, s: smp}
	if d.polled {
		sl.dt = at - d.lastAt
	}
	d.lastAt, d.polled = at, true
	sl.procs, sl.runMem = procs, runMem
	d.series.add(sl)
}

// check sorts an NVML return: true on success; on "not supported" the
// fields are marked unsupported for good; other errors are counted.
func (s *Sampler) check(d *device, ret nvml.Return, what string, fields ...string) bool {
	if ret == nvml.SUCCESS {
		return true
	}
	if ret == nvml.ERROR_GPU_IS_LOST {
		// Every later query would fail the same way: the device's
		// series ends here, the other devices go on.
		if d.lost == "" {
			d.lost, d.lostAt = retString(ret), d.pollAt
		}
		return false
	}
	if unsupported(ret) {
		for _, f := range fields {
			d.unsupported[f] = true
		}
		return false
	}
	s.soft(fmt.Sprintf("GPU %d: %s", d.index, what), ret)
	return false
}

// soft counts an error that cost data; Result turns them into warnings.
func (s *Sampler) soft(key string, ret nvml.Return) {
	e, ok := s.errs[key]
	if !ok {
		e = &softErr{}
		s.errs[key] = e
		s.errKeys = append(s.errKeys, key)
	}
	e.msg = retString(ret)
	e.count++
}

// sampleProcesses lists the device's processes at this poll, by pid, and
// the traced ones' summed memory. That sum counts the processes known to
// be the run's at the poll; one the tracer learns of later (it held GPU
// memory before its fork was seen) is the run's in its own entries only.
func (s *Sampler) sampleProcesses(d *device, now time.Time) ([]procEntry, uint64) {
	type seen struct {
		mem              *uint64
		smSum, memSum, n uint64
	}
	byPID := map[int32]*seen{}
	get := func(pid int32) *seen {
		p := byPID[pid]
		if p == nil {
			p = &seen{}
			byPID[pid] = p
		}
		return p
	}
	denied := false
	addList := func(what string, list func() ([]nvml.ProcessInfo, nvml.Return)) {
		if d.unsupported[what] || d.lost != "" || denied {
			return
		}
		infos, ret := list()
		// A refused list means the other is refused too: one warning.
		denied = ret == nvml.ERROR_NO_PERMISSION
		if !s.check(d, ret, what, what) {
			return
		}
		for _, info := range infos {
			p := get(int32(info.Pid))
			if info.UsedGpuMemory == notAvailable {
				continue // not reported (no permission, WDDM)
			}
			// A process with compute and graphics contexts is listed twice.
			if p.mem == nil || *p.mem < info.UsedGpuMemory {
				m := info.UsedGpuMemory
				p.mem = &m
			}
		}
	}
	addList("compute processes", d.handle.GetComputeRunningProcesses)
	addList("graphics processes", d.handle.GetGraphicsRunningProcesses)

	const putil = "process utilization"
	if !d.unsupported[putil] && d.lost == "" {
		samples, ret := d.handle.GetProcessUtilization(d.lastSeen)
		switch {
		case ret == nvml.SUCCESS:
		case ret == nvml.ERROR_NOT_FOUND, ret == nvml.ERROR_INSUFFICIENT_SIZE && len(samples) == 0:
			// No samples since lastSeen.
			samples = nil
		default:
			s.check(d, ret, putil, putil)
			samples = nil
		}
		last := d.lastSeen
		for _, u := range samples {
			if u.Pid == 0 || u.TimeStamp <= d.lastSeen {
				continue // unused or stale buffer entries
			}
			last = max(last, u.TimeStamp)
			p := get(int32(u.Pid))
			p.smSum += uint64(u.SmUtil)
			p.memSum += uint64(u.MemUtil)
			p.n++
		}
		d.lastSeen = last
	}

	entries := make([]procEntry, 0, len(byPID))
	var runMem uint64
	for pid, p := range byPID {
		k := procKey{dev: d.index, pid: pid}
		t := s.procs[k]
		if t == nil {
			t = &procTrack{first: now}
			s.procs[k] = t
		}
		if !t.tracedEver && s.opts.Traced != nil && s.opts.Traced(pid) {
			t.tracedEver = true
		}
		if !t.tracedEver {
			if _, ok := s.names[pid]; !ok {
				s.names[pid] = s.opts.Comm(pid)
			}
		}
		e := procEntry{pid: pid, polls: 1}
		t.last = now
		t.polls++
		if p.mem != nil {
			e.mem, e.memKnown = *p.mem, true
			t.memPeak = max(t.memPeak, *p.mem)
			if t.tracedEver {
				runMem += *p.mem
			}
		}
		if p.n > 0 {
			sm := (p.smSum + p.n/2) / p.n
			mu := (p.memSum + p.n/2) / p.n
			e.smSum, e.memSum, e.utilPolls = sm, mu, 1
			t.utilPolls++
			t.smSum += float64(sm)
			t.muSum += float64(mu)
			t.smPeak = max(t.smPeak, uint32(sm))
		}
		entries = append(entries, e)
	}
	sortProcs(entries)
	return entries, runMem
}

// Result returns the timeline as a record, times relative to start (the
// moment the command was released). It may be called more than once;
// call it after Stop for the whole run.
func (s *Sampler) Result(start time.Time) *record.GPU {
	if !s.Available() {
		return &record.GPU{Unavailable: s.Unavailable()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &record.GPU{IntervalNS: s.interval.Nanoseconds()}
	for _, d := range s.devices {
		info := d.info
		info.Unsupported = nil
		for _, f := range []string{
			record.GPUFieldUtil, record.GPUFieldMemUtil, record.GPUFieldMemUsed,
			record.GPUFieldSMClock, record.GPUFieldPower,
		} {
			if d.unsupported[f] {
				info.Unsupported = append(info.Unsupported, f)
			}
		}
		// The per-process queries, under the record's names for them.
		if d.unsupported["compute processes"] {
			info.Unsupported = append(info.Unsupported, record.GPUFieldProcesses)
		}
		if d.unsupported["process utilization"] {
			info.Unsupported = append(info.Unsupported, record.GPUFieldProcessUtil)
		}
		if d.lost != "" {
			at := d.lostAt.Sub(start).Nanoseconds()
			info.LostNS, info.LostReason = &at, d.lost
		}
		g.Devices = append(g.Devices, info)
	}
	offset := s.base.Sub(start)
	tracedKeys := map[procKey]bool{}
	for k, t := range s.procs {
		if t.tracedEver || (s.opts.Traced != nil && s.opts.Traced(k.pid)) {
			tracedKeys[k] = true
		}
	}
	for _, d := range s.devices {
		d.series.each(func(sl *slot) {
			t := (offset + sl.at).Nanoseconds()
			g.Samples = append(g.Samples, sl.sample(t))
			for _, p := range sl.procs {
				if tracedKeys[procKey{dev: d.index, pid: p.pid}] {
					g.Processes = append(g.Processes, sl.process(p, t))
				}
			}
		})
	}
	// Polls come device after device; the record holds them by time.
	sort.SliceStable(g.Samples, func(i, j int) bool { return g.Samples[i].TNS < g.Samples[j].TNS })

	keys := make([]procKey, 0, len(s.procs))
	for k := range s.procs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].dev != keys[j].dev {
			return keys[i].dev < keys[j].dev
		}
		return keys[i].pid < keys[j].pid
	})
	for _, k := range keys {
		if tracedKeys[k] {
			continue
		}
		t := s.procs[k]
		x := record.GPUInterference{
			Device:        k.dev,
			PID:           k.pid,
			Name:          s.names[k.pid],
			FirstNS:       t.first.Sub(start).Nanoseconds(),
			LastNS:        t.last.Sub(start).Nanoseconds(),
			Polls:         t.polls,
			MemPeakBytes:  t.memPeak,
			UtilPolls:     t.utilPolls,
			SMUtilPeakPct: t.smPeak,
		}
		if x.UtilPolls > 0 {
			x.SMUtilMeanPct = t.smSum / float64(x.UtilPolls)
			x.MemUtilMeanPct = t.muSum / float64(x.UtilPolls)
		}
		g.Interference = append(g.Interference, x)
	}
	sort.SliceStable(g.Processes, func(i, j int) bool { return g.Processes[i].TNS < g.Processes[j].TNS })

	for _, k := range s.errKeys {
		e := s.errs[k]
		w := fmt.Sprintf("%s: %s", k, e.msg)
		if e.count > 1 {
			w += fmt.Sprintf(" (%d times)", e.count)
		}
		g.Warnings = append(g.Warnings, w)
	}
	return g
}

// procComm reads /proc/PID/comm.
func procComm(pid int32) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
