package attribution

import (
	"slices"

	"github.com/coldtrace/coldtrace/record"
)

// SegmentGPU is one GPU over one segment: how long it was busy, its VRAM
// (everyone's) as the segment began, at its peak and as it ended, and the
// VRAM the traced processes allocated in it — what says that the first
// round loaded the model and the later ones reused it.
type SegmentGPU struct {
	Index int `json:"gpu"`
	// BusyNS is the segment's time in which the GPU ran a kernel (polls
	// with util above 0; a poll's interval straddling a cut is split pro
	// rata). Absent util: 0.
	BusyNS int64 `json:"busy_ns"`
	// VRAM*Bytes: device memory used, at the last poll at or before the
	// segment's start (its first poll in it when none), the most at one
	// poll in it, and at its last poll in it.
	VRAMStartBytes uint64 `json:"vram_start_bytes"`
	VRAMPeakBytes  uint64 `json:"vram_peak_bytes"`
	VRAMEndBytes   uint64 `json:"vram_end_bytes"`
	// RunVRAM*Bytes are the traced processes' summed GPU memory at the
	// same polls, when NVML listed processes (RunVRAMKnown).
	RunVRAMKnown      bool   `json:"run_vram_known"`
	RunVRAMStartBytes uint64 `json:"run_vram_start_bytes"`
	RunVRAMPeakBytes  uint64 `json:"run_vram_peak_bytes"`
	RunVRAMEndBytes   uint64 `json:"run_vram_end_bytes"`
	// AllocatedBytes is what the segment added to the VRAM it began with,
	// at its peak: the traced processes' growth when known
	// (AllocatedBy "processes"), else the device's ("device").
	AllocatedBytes uint64 `json:"allocated_bytes"`
	AllocatedBy    string `json:"allocated_by"`
	// LostNS, when set, is when in the segment (since its start) the GPU
	// was lost; the numbers stop there.
	LostNS *int64 `json:"lost_ns,omitempty"`
	// Polls counts the polls in the segment.
	Polls int `json:"polls"`
}

// SegmentGPUs gives one SegmentGPU per device of r for [start, end);
// nil when r has no GPU data. It reads the whole record, since the VRAM
// a segment begins with is the last poll before it.
func SegmentGPUs(r *record.Record, start, end int64) []SegmentGPU {
	g := r.GPU
	if g == nil || g.Unavailable != "" {
		return nil
	}
	out := make([]SegmentGPU, 0, len(g.Devices))
	for _, d := range g.Devices {
		out = append(out, segmentGPU(g, d, start, end))
	}
	return out
}

func segmentGPU(g *record.GPU, d record.GPUDevice, start, end int64) SegmentGPU {
	sg := SegmentGPU{Index: d.Index, AllocatedBy: "device"}
	if d.LostNS != nil && *d.LostNS >= start && *d.LostNS < end {
		at := *d.LostNS - start
		sg.LostNS = &at
	}
	ss := g.DeviceSamples(d.Index)
	run, runKnown := runMemByTime(g, d)
	sg.RunVRAMKnown = runKnown
	haveStart := false
	for i, s := range ss {
		if i > 0 {
			sg.BusyNS += busyIn(s, ss[i-1].TNS, start, end)
		}
		if !s.Has(record.GPUFieldMemUsed) || s.TNS > end || (s.TNS == end && end > start) {
			continue
		}
		rm := run[s.TNS]
		if s.Coarse() {
			rm = max(rm, s.RunMemPeakBytes)
		}
		if s.TNS <= start || !haveStart {
			// The last poll at or before the start; else the first in it.
			sg.VRAMStartBytes, sg.RunVRAMStartBytes = s.MemUsedBytes, run[s.TNS]
			sg.VRAMPeakBytes, sg.RunVRAMPeakBytes = s.MemUsedBytes, run[s.TNS]
			sg.VRAMEndBytes, sg.RunVRAMEndBytes = s.MemUsedBytes, run[s.TNS]
			haveStart = true
			if s.TNS <= start {
				continue
			}
		}
		sg.Polls += max(s.Polls, 1)
		sg.VRAMPeakBytes = max(sg.VRAMPeakBytes, s.MemPeak())
		sg.RunVRAMPeakBytes = max(sg.RunVRAMPeakBytes, rm)
		sg.VRAMEndBytes, sg.RunVRAMEndBytes = s.MemUsedBytes, run[s.TNS]
	}
	if runKnown {
		sg.AllocatedBy = "processes"
		sg.AllocatedBytes = sg.RunVRAMPeakBytes - min(sg.RunVRAMStartBytes, sg.RunVRAMPeakBytes)
	} else {
		sg.AllocatedBytes = sg.VRAMPeakBytes - min(sg.VRAMStartBytes, sg.VRAMPeakBytes)
	}
	return sg
}

// busyIn is the part of sample s's busy time (its interval since prev)
// that falls in [start, end).
func busyIn(s record.GPUSample, prev, start, end int64) int64 {
	dt := s.TNS - prev
	if dt <= 0 {
		return 0
	}
	busy := s.BusyIn(dt)
	if busy <= 0 {
		return 0
	}
	f := shareIn(prev, s.TNS, start, end)
	return int64(float64(busy) * f)
}

// runMemByTime sums the traced processes' memory per poll of device d;
// known says NVML listed processes with memory on it at all.
func runMemByTime(g *record.GPU, d record.GPUDevice) (map[int64]uint64, bool) {
	out := map[int64]uint64{}
	known := false
	for _, p := range g.Processes {
		if p.Device != d.Index || p.MemUsedBytes == nil {
			continue
		}
		known = true
		out[p.TNS] += *p.MemUsedBytes
	}
	if !known {
		// A device that lists processes but saw none of the run's: the
		// run held nothing on it.
		known = !slices.Contains(d.Unsupported, record.GPUFieldProcesses) && len(g.Processes) > 0
	}
	return out, known
}

// VRAMRelease says whether the run's VRAM was given back when it ended:
// the device's VRAM at the last poll that saw the run's processes hold
// memory (without per-process data: the last poll within the run) and
// at the last poll of all, which Sampler.Stop takes after the command
// exited. Released is set when the later poll shows less memory used
// and, where processes are listed, none of the run's.
type VRAMRelease struct {
	Index       int    `json:"gpu"`
	BeforeBytes uint64 `json:"before_bytes"`
	AfterBytes  uint64 `json:"after_bytes"`
	Released    bool   `json:"released"`
}

// VRAMReleases gives, per GPU the run held VRAM on, what its VRAM did at
// the exit; nil when r has no GPU data.
func VRAMReleases(r *record.Record) []VRAMRelease {
	g := r.GPU
	if g == nil || g.Unavailable != "" {
		return nil
	}
	var out []VRAMRelease
	for _, d := range g.Devices {
		run, known := runMemByTime(g, d)
		var before, after *record.GPUSample
		ss := g.DeviceSamples(d.Index)
		for i := range ss {
			s := &ss[i]
			if !s.Has(record.GPUFieldMemUsed) {
				continue
			}
			if (known && run[s.TNS] > 0) || (!known && s.TNS <= r.WallNS) {
				before = s
			}
			after = s
		}
		if before == nil || after == nil || after.TNS <= before.TNS {
			continue // the run held nothing there, or no poll after
		}
		out = append(out, VRAMRelease{Index: d.Index, BeforeBytes: before.MemUsedBytes, AfterBytes: after.MemUsedBytes,
			Released: after.MemUsedBytes < before.MemUsedBytes && run[after.TNS] == 0})
	}
	return out
}
