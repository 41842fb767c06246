package record

import (
	"slices"
	"sort"
)

// GPU holds the NVML timeline. Nil means GPU sampling was not attempted;
// Unavailable says why there is no data ("no NVIDIA GPU (…)"), and then the
// other fields are empty.
//
// Samples come one per device per poll. The first poll is taken when the
// sampler starts, before the command is released, so its time may be
// negative; it is the "before" state and covers no part of the run. Every
// later sample covers the interval since the previous sample of the same
// device.
type GPU struct {
	Unavailable string `json:"unavailable,omitempty"`
	// IntervalNS is the polling period asked for.
	IntervalNS int64       `json:"interval_ns,omitempty"`
	Devices    []GPUDevice `json:"devices,omitempty"`
	Samples    []GPUSample `json:"samples,omitempty"`
	// Processes are the traced processes seen on a GPU, one entry per
	// process per device per poll.
	Processes []GPUProcessSample `json:"processes,omitempty"`
	// Interference lists the GPU processes that were not traced, one entry
	// per process per device for the whole run. A run measured while
	// something else used the GPU must say so.
	Interference []GPUInterference `json:"interference,omitempty"`
	// Warnings are NVML errors that cost data but did not stop sampling.
	Warnings []string `json:"warnings,omitempty"`
}

// GPUDevice describes one GPU.
type GPUDevice struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	UUID     string `json:"uuid,omitempty"`
	MemTotal uint64 `json:"mem_total_bytes"`
	// Unsupported names the sample fields (GPUField*) this device does not
	// report (NVML said not supported); they are absent from its samples.
	Unsupported []string `json:"unsupported,omitempty"`
	// LostNS, when set, is when the device stopped answering (NVML said
	// the GPU is lost, as after an Xid 79): its samples end there and
	// LostReason says why. Times are relative to the record's start.
	LostNS     *int64 `json:"lost_ns,omitempty"`
	LostReason string `json:"lost_reason,omitempty"`
}

// Names of the optional fields of a GPUSample, as used in Absent and
// GPUDevice.Unsupported; GPUFieldProcesses and GPUFieldProcessUtil name
// the per-process queries in Unsupported (the device did not list its
// processes, or their utilization).
const (
	GPUFieldUtil        = "util"
	GPUFieldMemUtil     = "mem_util"
	GPUFieldMemUsed     = "mem_used"
	GPUFieldSMClock     = "sm_clock_mhz"
	GPUFieldPower       = "power_mw"
	GPUFieldProcesses   = "processes"
	GPUFieldProcessUtil = "process_util"
)

// GPUSample is one device's state at one instant. Every field besides TNS
// and Device may be absent: util, mem_util and mem_used are then listed in
// Absent (and read as 0); sm_clock_mhz and power_mw are then 0 and left out
// of the JSON. Use Has rather than testing the value.
type GPUSample struct {
	TNS    int64 `json:"t"`
	Device int   `json:"dev"`
	// UtilGPUPct is the percentage of the device's last sample period
	// (1/6 s to 1 s, by product) in which a kernel was running.
	UtilGPUPct uint32 `json:"util"`
	// UtilMemPct is the percentage of that period in which device memory
	// was read or written.
	UtilMemPct   uint32   `json:"mem_util"`
	MemUsedBytes uint64   `json:"mem_used"`
	SMClockMHz   uint32   `json:"sm_clock_mhz,omitempty"`
	PowerMW      uint32   `json:"power_mw,omitempty"`
	Absent       []string `json:"absent,omitempty"`

	// Polls, past a long run's first minute, is how many polls this
	// sample stands for (0: one, as taken). A coarse sample's interval is
	// the sum of its polls'; util and mem_util are their means, rounded;
	// mem_used, sm_clock_mhz and power_mw are the last poll's. The
	// totals are kept exact beside them, so that a run's mean, peak and
	// busy time do not depend on the coarsening: read them through
	// UtilCoveredNS, UtilPctNS, BusyIn, UtilPeak and MemPeak.
	Polls int `json:"polls,omitempty"`
	// UtilNS is the part of the interval whose polls reported util;
	// UtilSumPctNS and MemUtilSumPctNS are util and mem_util times their
	// polls' intervals, summed; BusyNS is the time of the polls whose
	// util was above 0.
	UtilNS          int64  `json:"util_ns,omitempty"`
	UtilSumPctNS    int64  `json:"util_pct_ns,omitempty"`
	MemUtilSumPctNS int64  `json:"mem_util_pct_ns,omitempty"`
	BusyNS          int64  `json:"busy_ns,omitempty"`
	UtilPeakPct     uint32 `json:"util_peak,omitempty"`
	MemPeakBytes    uint64 `json:"mem_peak,omitempty"`
	// RunMemPeakBytes is the peak over the polls of the traced processes'
	// summed device memory (coarse samples only: as taken, it is the
	// processes' own entries at the sample's time that say it).
	RunMemPeakBytes uint64 `json:"run_mem_peak,omitempty"`
}

// Coarse says whether the sample stands for more than one poll.
func (s GPUSample) Coarse() bool { return s.Polls > 1 }

// UtilCoveredNS is the part of the sample's interval dt (since the
// device's sample before it) with a util reading.
func (s GPUSample) UtilCoveredNS(dt int64) int64 {
	if s.Coarse() {
		return s.UtilNS
	}
	if !s.Has(GPUFieldUtil) {
		return 0
	}
	return dt
}

// UtilPctNS is the sample's util integrated over its interval dt, in
// percent-nanoseconds.
func (s GPUSample) UtilPctNS(dt int64) float64 {
	return s.pctNS(s.UtilSumPctNS, GPUFieldUtil, s.UtilGPUPct, dt)
}

// MemUtilPctNS is the sample's mem_util integrated over its interval dt.
func (s GPUSample) MemUtilPctNS(dt int64) float64 {
	return s.pctNS(s.MemUtilSumPctNS, GPUFieldMemUtil, s.UtilMemPct, dt)
}

// pctNS integrates a percentage field: a coarse sample's sum, or the
// poll's reading times its interval.
func (s GPUSample) pctNS(coarseSum int64, field string, pct uint32, dt int64) float64 {
	if s.Coarse() {
		return float64(coarseSum)
	}
	if !s.Has(field) {
		return 0
	}
	return float64(pct) * float64(dt)
}

// BusyIn is the time of the sample's interval dt in which the device
// reported a kernel running (util above 0).
func (s GPUSample) BusyIn(dt int64) int64 {
	if s.Coarse() {
		return s.BusyNS
	}
	if s.Has(GPUFieldUtil) && s.UtilGPUPct > 0 {
		return dt
	}
	return 0
}

// UtilPeak is the highest util of the polls the sample stands for.
func (s GPUSample) UtilPeak() uint32 { return max(s.UtilGPUPct, s.UtilPeakPct) }

// MemPeak is the most device memory used at one of its polls.
func (s GPUSample) MemPeak() uint64 { return max(s.MemUsedBytes, s.MemPeakBytes) }

// Has says whether the sample holds field (one of GPUField*).
func (s GPUSample) Has(field string) bool {
	switch field {
	case GPUFieldSMClock:
		return s.SMClockMHz != 0
	case GPUFieldPower:
		return s.PowerMW != 0
	}
	return !slices.Contains(s.Absent, field)
}

// GPUProcessSample is one traced process on one device at one poll. Nil
// fields were not known at that poll: NVML lists memory only for processes
// holding a context (and not at all without permission), and utilization
// only for processes that ran on the GPU since the previous poll.
type GPUProcessSample struct {
	TNS          int64   `json:"t"`
	Device       int     `json:"dev"`
	PID          int32   `json:"pid"`
	MemUsedBytes *uint64 `json:"mem_used,omitempty"`
	// SMUtilPct and MemUtilPct are the mean of the process's utilization
	// samples (nvmlDeviceGetProcessUtilization) since the previous poll.
	SMUtilPct  *uint32 `json:"sm_util,omitempty"`
	MemUtilPct *uint32 `json:"mem_util,omitempty"`

	// Polls is set on the entries of a coarse device sample (whose time
	// they share): the polls of its interval that listed the process.
	// mem_used is then the peak over them, sm_util and mem_util the means
	// over the UtilPolls that had utilization, and SMUtilSumPct their sum.
	Polls        int    `json:"polls,omitempty"`
	UtilPolls    int    `json:"util_polls,omitempty"`
	SMUtilSumPct uint64 `json:"sm_util_sum,omitempty"`
}

// Coarse says whether the entry belongs to a coarse device sample.
func (p GPUProcessSample) Coarse() bool { return p.Polls > 0 }

// SMUtilSum is the process's SM utilization summed over the polls the
// entry stands for.
func (p GPUProcessSample) SMUtilSum() uint64 {
	if p.Coarse() {
		return p.SMUtilSumPct
	}
	if p.SMUtilPct == nil {
		return 0
	}
	return uint64(*p.SMUtilPct)
}

// PollCount is how many polls the entry stands for.
func (p GPUProcessSample) PollCount() int { return max(p.Polls, 1) }

// GPUInterference is one GPU process that was not traced, over the run.
type GPUInterference struct {
	Device int   `json:"gpu"`
	PID    int32 `json:"pid"`
	// Name is /proc/PID/comm when it could be read.
	Name    string `json:"name,omitempty"`
	FirstNS int64  `json:"first_ns"`
	LastNS  int64  `json:"last_ns"`
	// Polls counts the polls that saw the process.
	Polls        int    `json:"polls"`
	MemPeakBytes uint64 `json:"mem_peak_bytes"`
	// UtilPolls counts the polls that had utilization samples for the
	// process; the means are over those polls. Zero means unknown.
	UtilPolls      int     `json:"util_polls"`
	SMUtilMeanPct  float64 `json:"sm_util_mean_pct"`
	SMUtilPeakPct  uint32  `json:"sm_util_peak_pct"`
	MemUtilMeanPct float64 `json:"mem_util_mean_pct"`
}

// GPUSummary is one GPU over the run, as reports show it.
type GPUSummary struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// UtilMeanPct is the time-weighted mean of the samples that cover the
	// run (all but the first); UtilPeakPct is their maximum.
	UtilMeanPct float64 `json:"util_mean_pct"`
	UtilPeakPct uint32  `json:"util_peak_pct"`
	// VRAM*: device memory used by everyone, at the first sample (before
	// the command was released), at most, and at the last sample.
	VRAMBeforeBytes uint64 `json:"vram_before_bytes"`
	VRAMPeakBytes   uint64 `json:"vram_peak_bytes"`
	VRAMEndBytes    uint64 `json:"vram_end_bytes"`
	VRAMTotalBytes  uint64 `json:"vram_total_bytes,omitempty"`
	// BusyNS is the time covered by samples whose util was above 0: each
	// sample after the first counts its interval since the previous one.
	BusyNS int64 `json:"busy_ns"`
	// RunVRAMPeakBytes is the peak of the traced processes' summed GPU
	// memory at one poll, when NVML reported per-process memory.
	RunVRAMPeakBytes uint64 `json:"run_vram_peak_bytes,omitempty"`
	// RunSharePct is the run's share of the GPU's work, in percent; nil when
	// unknown. ShareSource says how it was found: "process_util" (traced
	// processes' SM utilization over all processes'), or "sole_user" (no
	// per-process utilization, but only traced processes used the GPU).
	RunSharePct *float64 `json:"run_share_pct,omitempty"`
	ShareSource string   `json:"share_source,omitempty"`
	// Samples counts the device's polls (a coarse sample stands for
	// several).
	Samples int `json:"samples"`
	// Unsupported is copied from the device: fields it never reported.
	Unsupported []string `json:"unsupported,omitempty"`
	// LostNS and LostReason are copied from the device: the GPU was lost
	// then, and its numbers stop there.
	LostNS     *int64 `json:"lost_ns,omitempty"`
	LostReason string `json:"lost_reason,omitempty"`
}

// Summaries gives one GPUSummary per device, in device order. It is nil
// when g is nil or unavailable.
func (g *GPU) Summaries() []GPUSummary {
	if g == nil || g.Unavailable != "" {
		return nil
	}
	out := make([]GPUSummary, 0, len(g.Devices))
	for _, d := range g.Devices {
		out = append(out, g.summarise(d))
	}
	return out
}

// DeviceSamples returns the samples of device index, in time order.
func (g *GPU) DeviceSamples(index int) []GPUSample {
	if g == nil {
		return nil
	}
	var out []GPUSample
	for _, s := range g.Samples {
		if s.Device == index {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TNS < out[j].TNS })
	return out
}

func (g *GPU) summarise(d GPUDevice) GPUSummary {
	sum := GPUSummary{
		Index:          d.Index,
		Name:           d.Name,
		VRAMTotalBytes: d.MemTotal,
		Unsupported:    d.Unsupported,
		LostNS:         d.LostNS,
		LostReason:     d.LostReason,
	}
	ss := g.DeviceSamples(d.Index)

	// Polls; VRAM: first and last samples that carry it, and the peak.
	first := true
	for _, s := range ss {
		sum.Samples += max(s.Polls, 1)
		sum.RunVRAMPeakBytes = max(sum.RunVRAMPeakBytes, s.RunMemPeakBytes)
		if !s.Has(GPUFieldMemUsed) {
			continue
		}
		if first {
			sum.VRAMBeforeBytes = s.MemUsedBytes
			first = false
		}
		sum.VRAMEndBytes = s.MemUsedBytes
		sum.VRAMPeakBytes = max(sum.VRAMPeakBytes, s.MemPeak())
	}

	// Utilization: samples after the first cover the run, each weighted by
	// its interval. A lone sample stands for itself.
	var weighted float64
	var covered int64
	for i := 1; i < len(ss); i++ {
		s := ss[i]
		dt := s.TNS - ss[i-1].TNS
		cover := s.UtilCoveredNS(dt)
		if cover <= 0 || dt <= 0 {
			continue
		}
		weighted += s.UtilPctNS(dt)
		covered += cover
		sum.UtilPeakPct = max(sum.UtilPeakPct, s.UtilPeak())
		sum.BusyNS += s.BusyIn(dt)
	}
	if covered > 0 {
		sum.UtilMeanPct = weighted / float64(covered)
	} else if len(ss) == 1 && ss[0].Has(GPUFieldUtil) {
		sum.UtilMeanPct = float64(ss[0].UtilGPUPct)
		sum.UtilPeakPct = ss[0].UtilGPUPct
	}

	// The run's memory and share.
	var tracedUtil, otherUtil float64
	var tracedSeen, otherSeen bool
	runMem := map[int64]uint64{}
	for _, p := range g.Processes {
		if p.Device != d.Index {
			continue
		}
		tracedSeen = true
		// A coarse sample's entries hold peaks over its polls, whose sum
		// could overstate the run's: that sample's own peak says it.
		if p.MemUsedBytes != nil && !p.Coarse() {
			runMem[p.TNS] += *p.MemUsedBytes
		}
		tracedUtil += float64(p.SMUtilSum())
	}
	for _, m := range runMem {
		sum.RunVRAMPeakBytes = max(sum.RunVRAMPeakBytes, m)
	}
	for _, x := range g.Interference {
		if x.Device != d.Index {
			continue
		}
		otherSeen = true
		otherUtil += x.SMUtilMeanPct * float64(x.UtilPolls)
	}
	switch {
	case tracedUtil+otherUtil > 0:
		share := 100 * tracedUtil / (tracedUtil + otherUtil)
		sum.RunSharePct, sum.ShareSource = &share, "process_util"
	case tracedSeen && !otherSeen:
		share := 100.0
		sum.RunSharePct, sum.ShareSource = &share, "sole_user"
	}
	return sum
}

// InterferenceOn returns the interference entries of device index.
func (g *GPU) InterferenceOn(index int) []GPUInterference {
	if g == nil {
		return nil
	}
	var out []GPUInterference
	for _, x := range g.Interference {
		if x.Device == index {
			out = append(out, x)
		}
	}
	return out
}
