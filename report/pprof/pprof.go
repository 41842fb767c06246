package pprof

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/words"
)

// The sample types of the pprof export, in order. Wall time is the
// default: its values sum to the run's wall time, one stack per breakdown
// row, subject and process.
const (
	WallType  = "wall"      // unit nanoseconds
	BytesType = "disk_read" // unit bytes: bytes read from disk
)

// Write writes the breakdown of r as a gzipped pprof profile. res is
// the attribution of r; nil means attribution.Analyze(r).
//
// Stacks run root→leaf category → subject → process: the category is the
// breakdown row ("disk reads"), the subject what the time went to (a file,
// a compiler or JIT cache, a GPU, a download), the process "comm[pid]".
// Rows without subjects (CPU) go straight to processes, rows without
// processes (other wait) end at the category. The wall values sum to the
// wall time and each category's to its row; the disk_read values sum to
// the record's bytes from disk. Samples carry labels category, comm,
// file, cache and compiler, the numeric label pid, and the run's own
// labels (record.Labels: host, rank, …) so that profiles of many ranks
// stay apart once merged or pushed to a profiling server.
func Write(w io.Writer, r *record.Record, res *attribution.Result) error {
	p, err := Build(r, res)
	if err != nil {
		return err
	}
	if err := p.Write(w); err != nil {
		return fmt.Errorf("write pprof profile: %w", err)
	}
	return nil
}

// Build builds the profile WritePprof writes, checked with CheckValid.
func Build(r *record.Record, res *attribution.Result) (*profile.Profile, error) {
	if r == nil {
		return nil, fmt.Errorf("pprof: no record")
	}
	if res == nil {
		res = attribution.Analyze(r)
	}
	b := newBuilder(r, res)
	b.runLabels = r.Labels
	if len(r.Marks) > 0 {
		b.segments(r)
	} else {
		b.rows(r, res)
	}
	b.finish()
	if err := b.p.CheckValid(); err != nil {
		return nil, fmt.Errorf("pprof profile is invalid: %w", err)
	}
	return b.p, nil
}

// rows files every breakdown row of res.
func (b *builder) rows(r *record.Record, res *attribution.Result) {
	pi := newProcIndex(r)
	for i := range res.Breakdown {
		row := &res.Breakdown[i]
		subjects := rowSubjects(r, row, pi)
		procs := rowProcs(row, pi)
		if len(procs) == 0 {
			procs = priorProcs(subjects, nil, pi)
		}
		b.row(row, subjects, procs)
	}
}

// segments files a marked run segment by segment, each sample labelled
// with its segment: the segments tile the run, so the values still sum
// to the wall time.
func (b *builder) segments(r *record.Record) {
	run := b.runLabels
	for _, sr := range (attribution.Options{}).AnalyzeSegments(r, attribution.Segments(r, attribution.SegmentOptions{})) {
		b.runLabels = mergeLabels(run, map[string]string{"segment": sr.Label})
		b.rows(sr.Record, sr.Result)
	}
	b.runLabels = run
}

// frame is one stack frame: a pprof Function and its Location.
type frame struct {
	name   string
	file   string // Function.Filename, for file subjects and Python frames
	line   int64  // Line.Line, for Python frames
	system string // Function.SystemName where it differs from name: a native frame's linkage name
}

// subject is one piece of evidence under a category.
type subject struct {
	frame  frame
	ns     int64
	bytes  int64
	prior  map[int32]float64 // how plausible each pid is under the subject
	labels map[string]string
	// stacks are the Python stacks behind the subject's time (a file's
	// fills): each part hangs under its process with its frames.
	stacks []attribution.StackShare
}

// proc is one process of a row and its part of the row's time.
type proc struct {
	pid  int32
	comm string
	ns   int64
}

type builder struct {
	p       *profile.Profile
	mapping *profile.Mapping
	funcs   map[frame]*profile.Function
	locs    map[frame]*profile.Location
	samples map[string]*profile.Sample
	order   []string
	// runLabels go on every sample; a sample's own label of the same
	// name wins (the metrics' label check refuses such names up front).
	runLabels map[string]string
	// pyFrames are the Python frames each process was started from,
	// outermost first: they hang under its process frame.
	pyFrames map[int32][]frame
	// rec and procs name the processes of subjects' stacks.
	rec   *record.Record
	procs *procIndex
}

func newBuilder(r *record.Record, res *attribution.Result) *builder {
	m := &profile.Mapping{ID: 1, File: "coldtrace", HasFunctions: true, HasFilenames: true}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: WallType, Unit: "nanoseconds"},
			{Type: BytesType, Unit: "bytes"},
		},
		DefaultSampleType: WallType,
		PeriodType:        &profile.ValueType{Type: WallType, Unit: "nanoseconds"},
		Period:            max(r.IntervalNS, 1),
		DurationNanos:     res.WallNS,
		Mapping:           []*profile.Mapping{m},
	}
	if !r.Start.IsZero() {
		p.TimeNanos = r.Start.UnixNano()
	}
	p.Comments = append(p.Comments,
		fmt.Sprintf("coldtrace: %s — %s wall, exit %d", format.EscapeAll(r.Command), format.Duration(res.WallNS), r.ExitCode),
		"verdict: "+format.Escape(words.Verdict(res.Verdict)),
		"attribution rule: "+res.Rule)
	return &builder{p: p, mapping: m, funcs: map[frame]*profile.Function{},
		locs: map[frame]*profile.Location{}, samples: map[string]*profile.Sample{}, pyFrames: pythonFrames(r),
		rec: r, procs: newProcIndex(r)}
}

func (b *builder) location(fr frame) *profile.Location {
	if l := b.locs[fr]; l != nil {
		return l
	}
	// One Function per name and file, one Location per line of it.
	fk := frame{name: fr.name, file: fr.file, system: fr.system}
	f := b.funcs[fk]
	if f == nil {
		system := fr.system
		if system == "" {
			system = fr.name
		}
		f = &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: fr.name, SystemName: system, Filename: fr.file}
		b.funcs[fk] = f
		b.p.Function = append(b.p.Function, f)
	}
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Mapping: b.mapping, Line: []profile.Line{{Function: f, Line: fr.line}}}
	// Distinct addresses keep pprof from merging locations.
	l.Address = l.ID
	b.locs[fr] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

// add files wall and bytes under stack (root→leaf); samples with the same
// stack and labels merge.
func (b *builder) add(stack []frame, labels map[string]string, pid int32, wall, bytes int64) {
	if wall == 0 && bytes == 0 {
		return
	}
	if len(b.runLabels) > 0 {
		labels = mergeLabels(b.runLabels, labels)
	}
	locs := make([]*profile.Location, len(stack))
	var key strings.Builder
	for i, fr := range stack {
		l := b.location(fr)
		locs[len(stack)-1-i] = l // pprof wants the leaf first
		fmt.Fprintf(&key, "%d,", l.ID)
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&key, "|%s=%s", k, labels[k])
	}
	fmt.Fprintf(&key, "|pid=%d", pid)
	if s := b.samples[key.String()]; s != nil {
		s.Value[0] += wall
		s.Value[1] += bytes
		return
	}
	s := &profile.Sample{Location: locs, Value: []int64{wall, bytes}}
	for _, k := range keys {
		if labels[k] == "" {
			continue
		}
		if s.Label == nil {
			s.Label = map[string][]string{}
		}
		s.Label[k] = []string{labels[k]}
	}
	if pid > 0 {
		s.NumLabel = map[string][]int64{"pid": {int64(pid)}}
	}
	b.samples[key.String()] = s
	b.order = append(b.order, key.String())
}

func (b *builder) finish() {
	for _, k := range b.order {
		b.p.Sample = append(b.p.Sample, b.samples[k])
	}
}

// row files one breakdown row: its time over subjects and processes.
func (b *builder) row(row *attribution.Row, subjects []subject, procs []proc) {
	cat := frame{name: row.Category.Label()}
	base := map[string]string{"category": string(row.Category)}
	leaf := func(stack []frame, labels map[string]string, p *proc, wall, bytes int64) {
		l := mergeLabels(base, labels)
		var pid int32
		if p != nil {
			stack = append(stack, frame{name: format.ProcessLabel(p.pid, p.comm)})
			stack = append(stack, b.pyFrames[p.pid]...)
			l["comm"] = p.comm
			pid = p.pid
		}
		b.add(stack, l, pid, wall, bytes)
	}

	if len(subjects) == 0 {
		ns := attribution.Apportion(procWeights(procs), row.NS)
		var given int64
		for i := range procs {
			leaf([]frame{cat}, nil, &procs[i], ns[i], 0)
			given += ns[i]
		}
		leaf([]frame{cat}, nil, nil, row.NS-given, 0)
		return
	}

	// The subjects' times must sum to the row.
	var sum int64
	for _, s := range subjects {
		sum += s.ns
	}
	if sum != row.NS && sum > 0 {
		w := make([]float64, len(subjects))
		for i, s := range subjects {
			w[i] = float64(s.ns)
		}
		ns := attribution.Apportion(w, row.NS)
		for i := range subjects {
			subjects[i].ns = ns[i]
		}
		sum = row.NS
	}
	if sum < row.NS {
		leaf([]frame{cat}, nil, nil, row.NS-sum, 0)
	}

	m := fit(subjects, procs)
	for si, s := range subjects {
		stack := []frame{cat, s.frame}
		s.ns, s.bytes = b.stackParts(stack, mergeLabels(base, s.labels), s)
		ns := attribution.Apportion(m[si], s.ns)
		bs := attribution.Apportion(m[si], s.bytes)
		var gns, gbs int64
		for pi := range procs {
			leaf(stack, s.labels, &procs[pi], ns[pi], bs[pi])
			gns += ns[pi]
			gbs += bs[pi]
		}
		leaf(stack, s.labels, nil, s.ns-gns, s.bytes-gbs)
	}
}

// fit spreads each subject over the row's processes: the subject's prior
// (which processes it plausibly belongs to), fitted by iterative
// proportional fitting so that the processes' totals match the row's
// process evidence where the two sets of totals agree.
func fit(subjects []subject, procs []proc) [][]float64 {
	m := make([][]float64, len(subjects))
	colW := procWeights(procs)
	var colSum, rowSum float64
	for _, w := range colW {
		colSum += w
	}
	for si, s := range subjects {
		m[si] = make([]float64, len(procs))
		var rs float64
		for pi, p := range procs {
			m[si][pi] = s.prior[p.pid]
			rs += m[si][pi]
		}
		if rs == 0 {
			// No prior: the row's process mix.
			copy(m[si], colW)
		}
		rowSum += float64(s.ns)
	}
	if colSum <= 0 || math.Abs(colSum-rowSum) > 0.5 || rowSum == 0 {
		return m
	}
	for iter := 0; iter < 100; iter++ {
		for si, s := range subjects {
			var rs float64
			for _, v := range m[si] {
				rs += v
			}
			if rs > 0 {
				f := float64(s.ns) / rs
				for pi := range m[si] {
					m[si][pi] *= f
				}
			}
		}
		var worst float64
		for pi := range procs {
			var cs float64
			for si := range m {
				cs += m[si][pi]
			}
			if cs > 0 {
				f := colW[pi] / cs
				worst = max(worst, math.Abs(cs-colW[pi]))
				for si := range m {
					m[si][pi] *= f
				}
			}
		}
		if worst < 0.5 {
			break
		}
	}
	return m
}

func procWeights(procs []proc) []float64 {
	w := make([]float64, len(procs))
	for i, p := range procs {
		w[i] = float64(max(p.ns, 0))
	}
	return w
}

// procIndex looks processes up by pid.
type procIndex struct {
	byPID map[int32]*record.Process
	comm  map[int32]string
}

func newProcIndex(r *record.Record) *procIndex {
	pi := &procIndex{byPID: map[int32]*record.Process{}, comm: map[int32]string{}}
	for i := range r.Processes {
		p := &r.Processes[i]
		if _, dup := pi.byPID[p.PID]; !dup {
			pi.byPID[p.PID] = p
			if n := p.Name(); n != "?" {
				pi.comm[p.PID] = n
			}
		}
	}
	for _, t := range r.Threads {
		if _, ok := pi.comm[t.PID]; !ok && t.Comm != "" && t.TID == t.PID {
			pi.comm[t.PID] = t.Comm
		}
	}
	return pi
}

func (pi *procIndex) name(pid int32) string {
	if c, ok := pi.comm[pid]; ok {
		return c
	}
	return "?"
}

// procs lists the row's processes from its evidence. Rows without
// process evidence (GPU, download) take theirs from the subjects' priors
// (priorProcs).
func rowProcs(row *attribution.Row, pi *procIndex) []proc {
	out := make([]proc, 0, len(row.Processes))
	for _, p := range row.Processes {
		comm := p.Comm
		if comm == "" || comm == "?" {
			comm = pi.name(p.PID)
		}
		out = append(out, proc{pid: p.PID, comm: comm, ns: p.NS})
	}
	return out
}

// subjects turns a row's evidence into subjects with priors.
func rowSubjects(r *record.Record, row *attribution.Row, pi *procIndex) []subject {
	switch row.Category {
	case attribution.DiskRead:
		return diskSubjects(r, row)
	case attribution.JITCompile:
		return jitSubjects(r, row, pi)
	case attribution.GPUCompute:
		return gpuSubjects(r, row)
	case attribution.Download:
		return downloadSubjects(r, row)
	}
	return nil
}

func diskSubjects(r *record.Record, row *attribution.Row) []subject {
	prior := diskPriors(r)
	var out []subject
	seen := map[int]bool{}
	for _, f := range row.Files {
		s := subject{frame: frame{name: f.Path}, ns: f.NS, bytes: int64(f.BytesFromDisk), prior: prior[f.ID], stacks: f.Stacks}
		if f.ID >= 0 {
			seen[f.ID] = true
			s.frame.file = f.Path
			s.labels = map[string]string{"file": f.Path}
		} else if f.ID != attribution.OutsidePageCacheID {
			s.frame.name = attribution.UnidentifiedFile
		}
		out = append(out, s)
	}
	// Bytes from disk of files the evidence leaves out still count.
	for _, f := range r.Files {
		if f.BytesFromDisk > 0 && !seen[f.ID] {
			seen[f.ID] = true
			p := f.Name()
			out = append(out, subject{frame: frame{name: p, file: f.Path}, bytes: int64(f.BytesFromDisk),
				prior: prior[f.ID], labels: map[string]string{"file": p}})
		}
	}
	return out
}

// diskPriors joins files and processes within each sample: a file's
// disk time in a sample is spread over the processes by their disk time
// in that sample. File -1 takes the processes' disk time no file explains.
func diskPriors(r *record.Record) map[int]map[int32]float64 {
	out := map[int]map[int32]float64{}
	addTo := func(id int, pid int32, v float64) {
		if v <= 0 {
			return
		}
		m := out[id]
		if m == nil {
			m = map[int32]float64{}
			out[id] = m
		}
		m[pid] += v
	}
	for si := range r.Samples {
		s := &r.Samples[si]
		pw := map[int32]float64{}
		var psum, fsum float64
		for _, td := range s.Threads {
			cpu := max(td.CPUNS, 0)
			v := float64(max(td.IOWaitNS, 0) + min(max(td.MissCPUNS, 0), cpu))
			if v > 0 {
				pw[td.PID] += v
				psum += v
			}
		}
		if psum == 0 {
			continue
		}
		for _, fd := range s.Files {
			v := float64(max(fd.IOWaitNS, 0) + max(fd.MissCPUNS, 0))
			if v <= 0 {
				continue
			}
			fsum += v
			for pid, w := range pw {
				addTo(fd.File, pid, v*w/psum)
			}
		}
		if rest := psum - fsum; rest > 0 {
			for pid, w := range pw {
				addTo(-1, pid, rest*w/psum)
			}
		}
	}
	return out
}

func jitSubjects(r *record.Record, row *attribution.Row, pi *procIndex) []subject {
	caches := map[string]bool{}
	if r.JIT != nil {
		for _, c := range r.JIT.Caches {
			caches[c.Name] = true
		}
	}
	var out []subject
	for _, c := range row.Compilers {
		if c.NS == 0 {
			continue
		}
		// An in-process compile's stacks (its windows') hang under the
		// process that compiled, the frames of the line that called.
		s := subject{ns: c.NS, prior: map[int32]float64{}, labels: map[string]string{}, stacks: c.Stacks}
		switch c.Kind {
		case "compiler":
			s.frame.name = c.Name + " (compiler)"
			s.labels["compiler"] = c.Name
			for pid, p := range pi.byPID {
				if pi.name(pid) == c.Name {
					s.prior[pid] += float64(max(p.CPUNS+p.RunQueueNS, 1))
				}
			}
		case "in_process":
			s.frame.name = c.Name + " (in-process JIT)"
		case "uprobe":
			s.frame.name = c.Name + " (JIT call)"
		default:
			s.frame.name = c.Name + " (" + c.Kind + ")"
		}
		if caches[c.Name] {
			s.labels["cache"] = c.Name
			if c.Kind != "compiler" {
				s.frame.name = c.Name + " cache (in-process JIT)"
			}
		}
		if r.JIT != nil {
			for _, w := range r.JIT.Windows {
				kind, name := w.Kind, w.Source
				if kind == "" {
					kind = "in_process"
				}
				if name == "" {
					name = kind
				}
				if kind == c.Kind && name == c.Name && w.EndNS > w.StartNS {
					s.prior[w.PID] += float64(w.EndNS - w.StartNS)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

func gpuSubjects(r *record.Record, row *attribution.Row) []subject {
	var out []subject
	for _, g := range row.GPUs {
		if g.NS == 0 {
			continue
		}
		name := fmt.Sprintf("GPU %d", g.Index)
		if g.Name != "" {
			name += " (" + g.Name + ")"
		}
		s := subject{frame: frame{name: name}, ns: g.NS, prior: map[int32]float64{}}
		if r.GPU != nil {
			for _, p := range r.GPU.Processes {
				if p.Device != g.Index {
					continue
				}
				// One for each poll that saw it, plus its SM utilization.
				s.prior[p.PID] += float64(p.PollCount()) + float64(p.SMUtilSum())
			}
		}
		out = append(out, s)
	}
	return out
}

func downloadSubjects(r *record.Record, row *attribution.Row) []subject {
	var out []subject
	for _, d := range row.Downloads {
		if d.NS == 0 {
			continue
		}
		labels := map[string]string{"download": d.Name, "peer": cmp.Or(d.Host, d.Peer)}
		if !strings.HasPrefix(d.Path, "(") {
			labels["file"] = d.Path
		}
		s := subject{frame: frame{name: d.Name}, ns: d.NS, prior: map[int32]float64{}, labels: labels}
		for _, x := range r.Downloads {
			if attribution.DownloadKey(x) == d.Path {
				s.prior[x.PID] += float64(max(x.EndNS-x.StartNS, 1))
			}
		}
		out = append(out, s)
	}
	return out
}

// priorProcs adds to procs (with no time of their own) the pids the
// subjects' priors name but procs lacks, in pid order.
func priorProcs(subjects []subject, procs []proc, pi *procIndex) []proc {
	have := map[int32]bool{}
	for _, p := range procs {
		have[p.pid] = true
	}
	var extra []int32
	for _, s := range subjects {
		for pid := range s.prior {
			if !have[pid] {
				have[pid] = true
				extra = append(extra, pid)
			}
		}
	}
	slices.Sort(extra)
	for _, pid := range extra {
		procs = append(procs, proc{pid: pid, comm: pi.name(pid)})
	}
	return procs
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
