package attribution

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/record"
)

// Segment is a stretch [StartNS, EndNS) of a run: from one mark to the
// next, or between idle stretches (SegmentOptions.SplitIdleNS).
type Segment struct {
	// Index numbers segments in time order: 1 for the first mark's; 0
	// is the time before the first mark, when there is any.
	Index   int    `json:"index"`
	Label   string `json:"label"`
	StartNS int64  `json:"start_ns"`
	EndNS   int64  `json:"end_ns"`
}

// SegmentOptions say how a run is cut when it has no marks.
type SegmentOptions struct {
	// SplitIdleNS, when > 0, cuts at every stretch at least this long in
	// which the traced processes together used less than IdleCPUShare of
	// one CPU; the segment boundary is where the work resumes.
	SplitIdleNS int64
	// IdleCPUShare is 0.05 when zero.
	IdleCPUShare float64
}

// Segments cuts r at its marks; without marks, at idle stretches when
// o.SplitIdleNS is set; else the run is one segment.
func Segments(r *record.Record, o SegmentOptions) []Segment {
	wall := max(r.WallNS, 0)
	if len(r.Marks) > 0 {
		marks := append([]record.Mark(nil), r.Marks...)
		sort.SliceStable(marks, func(i, j int) bool { return marks[i].AtNS < marks[j].AtNS })
		var out []Segment
		if first := min(max(marks[0].AtNS, 0), wall); first > 0 {
			out = append(out, Segment{Index: 0, Label: "(before the first mark)", StartNS: 0, EndNS: first})
		}
		for i, m := range marks {
			start := min(max(m.AtNS, 0), wall)
			end := wall
			if i+1 < len(marks) {
				end = min(max(marks[i+1].AtNS, start), wall)
			}
			label := m.Label
			if label == "" {
				label = "mark " + strconv.Itoa(i+1)
			}
			out = append(out, Segment{Index: i + 1, Label: label, StartNS: start, EndNS: end})
		}
		return out
	}
	if o.SplitIdleNS > 0 {
		return idleSegments(r, wall, o)
	}
	return []Segment{{Index: 1, Label: "whole run", StartNS: 0, EndNS: wall}}
}

// idleSegments cuts where work resumes after an idle stretch of at least
// o.SplitIdleNS. An idle start (attached to a waiting server) is not a
// cut: the first segment begins at 0.
func idleSegments(r *record.Record, wall int64, o SegmentOptions) []Segment {
	share := o.IdleCPUShare
	if share <= 0 {
		share = 0.05
	}
	samples := append([]record.Sample(nil), r.Samples...)
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].EndNS < samples[j].EndNS })
	var cuts []int64
	prev := int64(0)
	idleFrom := int64(-1) // start of the current idle stretch
	sawWork := false
	for _, s := range samples {
		d := s.EndNS - prev
		if d <= 0 {
			continue
		}
		var cpu int64
		for _, td := range s.Threads {
			cpu += pos(td.CPUNS) + pos(td.IOWaitNS)
		}
		idle := float64(cpu) < share*float64(d)
		switch {
		case idle && idleFrom < 0:
			idleFrom = prev
		case !idle:
			if idleFrom >= 0 && sawWork && prev-idleFrom >= o.SplitIdleNS {
				cuts = append(cuts, prev)
			}
			idleFrom = -1
			sawWork = true
		}
		prev = s.EndNS
	}
	var out []Segment
	start := int64(0)
	for _, c := range append(cuts, wall) {
		if c <= start && c != wall {
			continue
		}
		n := len(out) + 1
		out = append(out, Segment{Index: n, Label: "segment " + strconv.Itoa(n), StartNS: start, EndNS: max(c, start)})
		start = c
	}
	return out
}

// PickSegment finds a segment by its number or its label.
func PickSegment(segs []Segment, spec string) (Segment, error) {
	spec = strings.TrimSpace(spec)
	if n, err := strconv.Atoi(spec); err == nil {
		for _, s := range segs {
			if s.Index == n {
				return s, nil
			}
		}
		return Segment{}, fmt.Errorf("no segment %d (%s)", n, segmentList(segs))
	}
	for _, s := range segs {
		if s.Label == spec {
			return s, nil
		}
	}
	return Segment{}, fmt.Errorf("no segment labelled %q (%s)", spec, segmentList(segs))
}

func segmentList(segs []Segment) string {
	parts := make([]string, 0, len(segs))
	for _, s := range segs {
		parts = append(parts, fmt.Sprintf("%d %q", s.Index, s.Label))
	}
	if len(parts) == 0 {
		return "the record has none"
	}
	return "the record has " + strings.Join(parts, ", ")
}

// SegmentResult is one segment's attribution.
type SegmentResult struct {
	Segment
	Result *Result
	// Record is the segment's part of the record (SliceRecord).
	Record *record.Record `json:"-"`
	// GPUs are the segment's GPU busy time and VRAM, per device.
	GPUs []SegmentGPU `json:"gpus,omitempty"`
	// VRAMAtExit, on the last segment only, says per GPU whether the
	// run's VRAM was released when the command exited.
	VRAMAtExit []VRAMRelease `json:"vram_at_exit,omitempty"`
}

// AnalyzeSegments attributes each segment of r on its own (SliceRecord).
func (o Options) AnalyzeSegments(r *record.Record, segs []Segment) []SegmentResult {
	out := make([]SegmentResult, 0, len(segs))
	for _, s := range segs {
		sub := SliceRecord(r, s.StartNS, s.EndNS)
		out = append(out, SegmentResult{Segment: s, Result: o.Analyze(sub), Record: sub,
			GPUs: SegmentGPUs(r, s.StartNS, s.EndNS)})
	}
	if len(out) > 0 {
		out[len(out)-1].VRAMAtExit = VRAMReleases(r)
	}
	return out
}

// SliceRecord is the part of r in [start, end) as a record of its own: times
// shifted so that start is 0, samples restricted to the stretch (one that
// straddles a boundary is split pro rata), file totals summed from the
// samples kept, JIT windows and downloads clipped to it. r is not
// changed. Whole-run facts without times (cache health, compilers'
// totals) stay with the segments in which compile windows fall.
func SliceRecord(r *record.Record, start, end int64) *record.Record {
	wall := max(r.WallNS, 0)
	start = min(max(start, 0), wall)
	end = min(max(end, start), wall)
	out := *r
	out.Start = r.Start.Add(time.Duration(start))
	out.WallNS = end - start
	out.Partial = nil
	out.Marks = nil
	out.Samples = sliceSamples(r, start, end)
	out.Files = sliceFiles(r.Files, out.Samples)
	out.Processes = make([]record.Process, len(r.Processes))
	for i, p := range r.Processes {
		p.StartNS = clip(p.StartNS-start, out.WallNS)
		if p.EndNS != 0 {
			if p.EndNS <= start {
				p.EndNS = 0
			} else {
				p.EndNS = clip(p.EndNS-start, out.WallNS)
			}
		}
		out.Processes[i] = p
	}
	out.JIT = sliceJIT(r.JIT, start, end)
	out.ReadExitSpans, out.ReadExitsFromNS = sliceReadExits(r, start, end)
	out.RseqReturnSpans = sliceSpans(r.RseqReturnSpans, start, end)
	out.Downloads = nil
	for _, d := range r.Downloads {
		if d.EndNS <= start || d.StartNS >= end {
			continue
		}
		f := shareIn(d.StartNS, d.EndNS, start, end)
		d.StartNS = clip(d.StartNS-start, out.WallNS)
		d.EndNS = clip(d.EndNS-start, out.WallNS)
		d.ConnectNS = clip(d.ConnectNS-start, out.WallNS)
		d.Bytes = uint64(math.Round(float64(d.Bytes) * f))
		var ds []record.DownloadSample
		for _, s := range d.Samples {
			if s.EndNS > start && s.EndNS <= end {
				s.EndNS -= start
				ds = append(ds, s)
			}
		}
		d.Samples = ds
		out.Downloads = append(out.Downloads, d)
	}
	if r.GPU != nil {
		out.GPU = sliceGPU(r.GPU, start, end)
	}
	return &out
}

// sliceGPU keeps the GPU polls in (start, end] and, per device, the last
// poll at or before start: as a record's first poll it is the state the
// segment began with (its VRAM), and the first poll inside covers the
// interval since it. Lost times move with the slice.
func sliceGPU(src *record.GPU, start, end int64) *record.GPU {
	g := *src
	g.Samples = nil
	before := map[int]int64{} // device → time of its last poll at or before start
	for _, s := range src.Samples {
		if s.TNS <= start {
			if t, ok := before[s.Device]; !ok || s.TNS > t {
				before[s.Device] = s.TNS
			}
		}
	}
	keep := func(dev int, t int64) bool {
		if b, ok := before[dev]; ok && t == b {
			return true
		}
		return t > start && t <= end
	}
	for _, s := range src.Samples {
		if keep(s.Device, s.TNS) {
			s.TNS -= start
			g.Samples = append(g.Samples, s)
		}
	}
	g.Processes = nil
	for _, s := range src.Processes {
		if keep(s.Device, s.TNS) {
			s.TNS -= start
			g.Processes = append(g.Processes, s)
		}
	}
	g.Devices = make([]record.GPUDevice, len(src.Devices))
	for i, d := range src.Devices {
		if d.LostNS != nil {
			at := *d.LostNS - start
			d.LostNS = &at
		}
		g.Devices[i] = d
	}
	g.Interference = nil
	return &g
}

func clip(v, wall int64) int64 { return min(max(v, 0), wall) }

// shareIn is the share of [a, b) inside [s, e).
func shareIn(a, b, s, e int64) float64 {
	if b <= a {
		return 0
	}
	return float64(max(0, min(b, e)-max(a, s))) / float64(b-a)
}

// sliceSamples keeps the samples of (start, end], shifted; a sample that
// straddles a boundary keeps the share of its deltas inside.
func sliceSamples(r *record.Record, start, end int64) []record.Sample {
	samples := append([]record.Sample(nil), r.Samples...)
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].EndNS < samples[j].EndNS })
	var out []record.Sample
	prev := int64(0)
	for _, s := range samples {
		from := prev
		prev = max(prev, s.EndNS)
		if s.EndNS <= start || from >= end {
			continue
		}
		f := shareIn(from, s.EndNS, start, end)
		if s.EndNS <= from {
			f = 1 // a late sample at a cut already made: keep it whole
		}
		ns := record.Sample{EndNS: min(s.EndNS, end) - start}
		for _, td := range s.Threads {
			ns.Threads = append(ns.Threads, record.ThreadDelta{TID: td.TID, PID: td.PID, CPUNS: scale(td.CPUNS, f),
				IOWaitNS: scale(td.IOWaitNS, f), MissCPUNS: scale(td.MissCPUNS, f), RunQueueNS: scale(td.RunQueueNS, f),
				OtherWaitNS: scale(td.OtherWaitNS, f)})
		}
		for _, fd := range s.Files {
			ns.Files = append(ns.Files, record.FileDelta{File: fd.File, PagesAccessed: scaleU(fd.PagesAccessed, f),
				PagesMissed: scaleU(fd.PagesMissed, f), PagesEvicted: scaleU(fd.PagesEvicted, f),
				IOWaitNS: scale(fd.IOWaitNS, f), MissCPUNS: scale(fd.MissCPUNS, f), PagesCreated: scaleU(fd.PagesCreated, f),
				Stacks: scaleStacks(fd.Stacks, f)})
		}
		out = append(out, ns)
	}
	return out
}

// scaleStacks is a file delta's stacks' share of an interval cut.
func scaleStacks(st []record.SampleStack, f float64) []record.SampleStack {
	if len(st) == 0 || f >= 1 {
		return st
	}
	out := make([]record.SampleStack, len(st))
	for i, s := range st {
		out[i] = record.SampleStack{N: s.N, NS: scale(s.NS, f)}
	}
	return out
}

func scale(v int64, f float64) int64 {
	if f >= 1 {
		return v
	}
	return int64(math.Round(float64(v) * f))
}

func scaleU(v uint64, f float64) uint64 {
	if f >= 1 {
		return v
	}
	return uint64(math.Round(float64(v) * f))
}

// sliceFiles are r's files with their counters summed from the samples
// kept; bytes from disk follow the pages missed.
func sliceFiles(files []record.File, samples []record.Sample) []record.File {
	out := make([]record.File, len(files))
	for i, f := range files {
		g := f
		g.PagesAccessed, g.PagesMissed, g.PagesEvicted, g.PagesCreated = 0, 0, 0, 0
		g.IOWaitNS, g.MissCPUNS, g.BytesFromDisk = 0, 0, 0
		out[i] = g
	}
	for _, s := range samples {
		for _, fd := range s.Files {
			if fd.File < 0 || fd.File >= len(out) {
				continue
			}
			g := &out[fd.File]
			g.PagesAccessed += fd.PagesAccessed
			g.PagesMissed += fd.PagesMissed
			g.PagesEvicted += fd.PagesEvicted
			g.PagesCreated += fd.PagesCreated
			g.IOWaitNS += fd.IOWaitNS
			g.MissCPUNS += fd.MissCPUNS
		}
	}
	for i := range out {
		if f := files[i]; f.PagesMissed > 0 {
			out[i].BytesFromDisk = uint64(math.Round(float64(f.BytesFromDisk) * float64(out[i].PagesMissed) / float64(f.PagesMissed)))
		}
	}
	return out
}

// sliceReadExits keeps the intervals in which the read exits were on
// that overlap [start, end), and when they first went on within it (a
// record made before the intervals were recorded has only the latter).
func sliceReadExits(r *record.Record, start, end int64) ([]record.ReadExitSpan, *int64) {
	wall := end - start
	if len(r.ReadExitSpans) == 0 {
		if r.ReadExitsFromNS == nil || *r.ReadExitsFromNS >= end {
			return nil, nil
		}
		from := clip(*r.ReadExitsFromNS-start, wall)
		return nil, &from
	}
	out := sliceSpans(r.ReadExitSpans, start, end)
	if len(out) == 0 {
		return nil, nil
	}
	from := out[0].FromNS
	return out, &from
}

// sliceSpans keeps the intervals of spans that overlap [start, end),
// clipped to it and counted from start.
func sliceSpans(spans []record.ReadExitSpan, start, end int64) []record.ReadExitSpan {
	wall := end - start
	var out []record.ReadExitSpan
	for _, sp := range spans {
		if sp.ToNS <= start || sp.FromNS >= end {
			continue
		}
		if sp.ToNS > end {
			sp.Off = "" // still on where the slice ends
		}
		sp.FromNS = clip(sp.FromNS-start, wall)
		sp.ToNS = clip(sp.ToNS-start, wall)
		out = append(out, sp)
	}
	return out
}

// sliceJIT keeps the compile windows inside [start, end) and the caches
// and compilers they name.
func sliceJIT(j *record.JIT, start, end int64) *record.JIT {
	if j == nil {
		return nil
	}
	out := &record.JIT{PathSyscalls: j.PathSyscalls}
	names := map[string]bool{}
	wall := end - start
	for _, sp := range j.PathSyscallSpans {
		if sp.ToNS <= start || sp.FromNS >= end {
			continue
		}
		sp.FromNS = clip(sp.FromNS-start, wall)
		sp.ToNS = clip(sp.ToNS-start, wall)
		out.PathSyscallSpans = append(out.PathSyscallSpans, sp)
	}
	for _, w := range j.Windows {
		if w.EndNS <= start || w.StartNS >= end {
			continue
		}
		w.CPUNS = scale(w.CPUNS, shareIn(w.StartNS, w.EndNS, start, end))
		w.StartNS = clip(w.StartNS-start, wall)
		w.EndNS = clip(w.EndNS-start, wall)
		names[w.Source] = true
		out.Windows = append(out.Windows, w)
	}
	for _, c := range j.Caches {
		if names[c.Name] {
			out.Caches = append(out.Caches, c)
		}
	}
	for _, c := range j.Compilers {
		if names[c.Name] {
			out.Compilers = append(out.Compilers, c)
		}
	}
	for _, u := range j.Uprobes {
		if names[u.Name] {
			out.Uprobes = append(out.Uprobes, u)
		}
	}
	return out
}
