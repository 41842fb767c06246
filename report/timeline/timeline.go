package timeline

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/words"
)

// Schema names the timeline in its otherData ("schema"); the record's
// own id stands beside it as "record_schema".
const Schema = "coldtrace.timeline/v1"

// The timeline's synthetic process, which holds the run-wide tracks
// (phases, compile slices, counters). Its pid is above any Linux pid
// (pid_max is at most 2^22) and fits an int32.
const (
	RunPID = 0x7fff0000

	phasesTID   = 1
	compileTID  = 100  // compile lanes are 100, 101, …
	downloadTID = 1000 // download lanes are 1000, 1001, …
)

// Write writes r as a Chrome trace-event JSON document, the format
// Perfetto (ui.perfetto.dev) and chrome://tracing open. res is the
// attribution of r; nil means attribution.Analyze(r).
//
// Each traced thread is a track (pid/tid, named by process_name and
// thread_name metadata) with its states in every sample interval as
// complete ("X") events, laid end to end inside the interval in a fixed
// order: on-CPU, page-cache fill (on-CPU time spent filling the cache),
// I/O wait, run queue, other wait; the interval's order is not recorded,
// only the amounts. I/O states name the file that carried the most of that
// state in the interval (file deltas are per file, not per thread).
// Adjacent equal states merge. A thread absent from a sample has no event
// there (it slept, or did not exist yet).
//
// A synthetic process "coldtrace" (pid RunPID) holds the phases
// track, compile tracks (JIT windows and compiler processes, spread over
// lanes so that no two overlap), download tracks, and counters: disk read MB/s and
// page-cache misses/s (pages missed × page size per interval), the
// breakdown's split of each slice in percent, and per GPU utilization and
// VRAM. Timestamps are microseconds since the command was released, with
// nanosecond digits.
func Write(w io.Writer, r *record.Record, res *attribution.Result) error {
	if r == nil {
		return errors.New("timeline: no record")
	}
	if res == nil {
		res = attribution.Analyze(r)
	}
	tb := &builder{r: r, res: res}
	tb.build()
	doc := document{
		TraceEvents:     tb.events(),
		DisplayTimeUnit: "ms",
		OtherData: map[string]string{
			"command":       strings.Join(r.Command, " "),
			"wall":          format.Duration(res.WallNS),
			"exit_code":     strconv.Itoa(r.ExitCode),
			"verdict":       words.Verdict(res.Verdict),
			"rule":          res.Rule,
			"schema":        Schema,
			"record_schema": record.Schema,
		},
	}
	if !r.Start.IsZero() {
		doc.OtherData["start"] = r.Start.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	if r.Host.Hostname != "" {
		doc.OtherData["host"] = r.Host.Hostname
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write timeline: %w", err)
	}
	return nil
}

type document struct {
	TraceEvents     []*event          `json:"traceEvents"`
	DisplayTimeUnit string            `json:"displayTimeUnit"`
	OtherData       map[string]string `json:"otherData"`
}

// micros is a time in nanoseconds, written as microseconds with three
// decimals, so that ts+dur is exact in the file.
type micros int64

func (t micros) MarshalJSON() ([]byte, error) {
	v := int64(t)
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return []byte(fmt.Sprintf("%s%d.%03d", sign, v/1000, v%1000)), nil
}

type event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   micros         `json:"ts"`
	Dur  *micros        `json:"dur,omitempty"`
	PID  int64          `json:"pid"`
	TID  int64          `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
	// Scope of an instant event: "g" draws it across every track.
	Scope string `json:"s,omitempty"`

	end int64 // ns, for X events
}

type builder struct {
	r    *record.Record
	res  *attribution.Result
	meta []*event
	evs  []*event

	lastCounter map[string]string
}

func (tb *builder) build() {
	tb.metadata()
	groups := intervals(tb.r.Samples)
	tb.threads(groups)
	tb.phases()
	tb.compiles()
	tb.diskCounters(groups)
	tb.sliceCounters()
	tb.gpuCounters()
	tb.networkCounter()
	tb.marks()
}

// events returns metadata first, then every other event by time; at equal
// times longer slices come first so that parents precede their children.
func (tb *builder) events() []*event {
	slices.SortStableFunc(tb.evs, func(a, b *event) int {
		return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(b.end-int64(b.TS), a.end-int64(a.TS)))
	})
	return append(append([]*event{}, tb.meta...), tb.evs...)
}

func (tb *builder) addMeta(name string, pid, tid int64, args map[string]any) {
	tb.meta = append(tb.meta, &event{Name: name, Cat: "__metadata", Ph: "M", PID: pid, TID: tid, Args: args})
}

// slice adds a complete event; empty or inverted spans are dropped.
func (tb *builder) slice(name, cat string, pid, tid, start, end int64, args map[string]any) *event {
	start = max(start, 0)
	if end <= start {
		return nil
	}
	d := micros(end - start)
	e := &event{Name: name, Cat: cat, Ph: "X", TS: micros(start), Dur: &d, PID: pid, TID: tid, Args: args, end: end}
	tb.evs = append(tb.evs, e)
	return e
}

// counter adds a counter value; a value equal to the counter's last one
// adds nothing (a counter holds its value until the next event).
func (tb *builder) counter(name string, pid, ts int64, args map[string]any) {
	v := fmt.Sprint(args) // fmt sorts map keys
	k := fmt.Sprintf("%d/%s", pid, name)
	if last, ok := tb.lastCounter[k]; ok && last == v {
		return
	}
	if tb.lastCounter == nil {
		tb.lastCounter = map[string]string{}
	}
	tb.lastCounter[k] = v
	tb.evs = append(tb.evs, &event{Name: name, Cat: "counter", Ph: "C", TS: micros(max(ts, 0)), PID: pid, Args: args, end: max(ts, 0)})
}

// interval is the samples that cover (start, end]: cut at the samples'
// end times the way attribution cuts slices, with samples that end at or
// before the previous cut merged into the interval before.
type interval struct {
	start, end int64
	samples    []*record.Sample
}

func intervals(samples []record.Sample) []interval {
	ss := make([]*record.Sample, len(samples))
	for i := range samples {
		ss[i] = &samples[i]
	}
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].EndNS < ss[j].EndNS })
	var out []interval
	var pending []*record.Sample
	prev := int64(0)
	for _, s := range ss {
		if s.EndNS <= prev {
			if n := len(out); n > 0 {
				out[n-1].samples = append(out[n-1].samples, s)
			} else {
				pending = append(pending, s)
			}
			continue
		}
		out = append(out, interval{start: prev, end: s.EndNS, samples: append(pending, s)})
		pending = nil
		prev = s.EndNS
	}
	return out
}

// ---- processes and threads ----

func (tb *builder) metadata() {
	r := tb.r
	tb.addMeta("process_name", RunPID, 0, map[string]any{"name": "coldtrace: " + format.Trim(strings.Join(r.Command, " "), 80)})
	tb.addMeta("process_sort_index", RunPID, 0, map[string]any{"sort_index": -1})
	tb.addMeta("thread_name", RunPID, phasesTID, map[string]any{"name": "phases"})
	tb.addMeta("thread_sort_index", RunPID, phasesTID, map[string]any{"sort_index": 0})

	named := map[int32]bool{}
	for i, p := range r.Processes {
		if named[p.PID] {
			continue
		}
		named[p.PID] = true
		name := p.Name()
		if len(p.Args) > 0 {
			name += " (" + format.Trim(strings.Join(p.Args, " "), 60) + ")"
		}
		tb.addMeta("process_name", int64(p.PID), 0, map[string]any{"name": name})
		tb.addMeta("process_sort_index", int64(p.PID), 0, map[string]any{"sort_index": i})
	}
	seen := map[[2]int32]bool{}
	for _, t := range r.Threads {
		k := [2]int32{t.PID, t.TID}
		if seen[k] {
			continue
		}
		seen[k] = true
		if !named[t.PID] {
			named[t.PID] = true
			tb.addMeta("process_name", int64(t.PID), 0, map[string]any{"name": t.Comm})
		}
		tb.addMeta("thread_name", int64(t.PID), int64(t.TID), map[string]any{"name": t.Comm})
	}
	// Threads seen only in samples.
	for _, s := range r.Samples {
		for _, td := range s.Threads {
			k := [2]int32{td.PID, td.TID}
			if seen[k] {
				continue
			}
			seen[k] = true
			if !named[td.PID] {
				named[td.PID] = true
				tb.addMeta("process_name", int64(td.PID), 0, map[string]any{"name": fmt.Sprintf("pid %d", td.PID)})
			}
			tb.addMeta("thread_name", int64(td.PID), int64(td.TID), map[string]any{"name": fmt.Sprintf("tid %d", td.TID)})
		}
	}
}

// threadState is one state of a thread inside an interval.
type threadState struct {
	name, cat string
	ns        int64
	args      map[string]any
}

func (tb *builder) threads(groups []interval) {
	type key struct{ pid, tid int32 }
	open := map[key]*event{}
	for _, g := range groups {
		deltas := map[key]*record.ThreadDelta{}
		var order []key
		ioFile, fillFile := map[int]int64{}, map[int]int64{}
		fileStacks := map[int]map[int]int64{} // file → record stack → ns
		for _, s := range g.samples {
			for _, td := range s.Threads {
				k := key{td.PID, td.TID}
				d := deltas[k]
				if d == nil {
					d = &record.ThreadDelta{PID: td.PID, TID: td.TID}
					deltas[k] = d
					order = append(order, k)
				}
				d.CPUNS += max(td.CPUNS, 0)
				d.IOWaitNS += max(td.IOWaitNS, 0)
				d.MissCPUNS += max(td.MissCPUNS, 0)
				d.RunQueueNS += max(td.RunQueueNS, 0)
				d.OtherWaitNS += max(td.OtherWaitNS, 0)
			}
			for _, fd := range s.Files {
				ioFile[fd.File] += max(fd.IOWaitNS, 0)
				fillFile[fd.File] += max(fd.MissCPUNS, 0)
				tb.addStacks(fileStacks, fd)
			}
		}
		ioName, ioArgs := tb.fileState("I/O wait", ioFile, fileStacks)
		fillName, fillArgs := tb.fileState("page-cache fill", fillFile, fileStacks)
		length := g.end - g.start
		for _, k := range order {
			d := deltas[k]
			miss := min(d.MissCPUNS, d.CPUNS)
			states := []threadState{
				{"on-CPU", "cpu", d.CPUNS - miss, nil},
				{fillName, "disk", miss, fillArgs},
				{ioName, "disk", d.IOWaitNS, ioArgs},
				{"run queue", "sched", d.RunQueueNS, nil},
				{"other wait", "wait", d.OtherWaitNS, nil},
			}
			var total int64
			for _, st := range states {
				total += st.ns
			}
			if total > length && total > 0 {
				// Polling jitter: squeeze the states into the interval.
				w := make([]float64, len(states))
				for i, st := range states {
					w[i] = float64(st.ns)
				}
				for i, v := range attribution.Apportion(w, length) {
					states[i].ns = v
				}
			}
			t := g.start
			for _, st := range states {
				if st.ns <= 0 {
					continue
				}
				end := t + st.ns
				// A slice goes on into the next interval in the same state
				// at the same call site.
				if e := open[k]; e != nil && e.Name == st.name && e.end == t && e.Args["stack"] == st.args["stack"] {
					e.end = end
					*e.Dur = micros(end - int64(e.TS))
				} else {
					open[k] = tb.slice(st.name, st.cat, int64(k.pid), int64(k.tid), t, end, st.args)
				}
				t = end
			}
		}
	}
}

// addStacks adds a file delta's stacks to the interval's, by the record's
// stack (several kernel stacks may decode to one).
func (tb *builder) addStacks(fileStacks map[int]map[int]int64, fd record.FileDelta) {
	for _, st := range fd.Stacks {
		idx := tb.r.SampleStackAt(st.N)
		if idx == 0 || st.NS <= 0 {
			continue
		}
		m := fileStacks[fd.File]
		if m == nil {
			m = map[int]int64{}
			fileStacks[fd.File] = m
		}
		m[idx] += st.NS
	}
}

// topStack is the stack with the most time in the interval among byStack,
// 0 for none.
func topStack(byStack map[int]int64) int {
	best, bestNS := 0, int64(0)
	for idx, ns := range byStack {
		if ns > bestNS || ns == bestNS && ns > 0 && idx < best {
			best, bestNS = idx, ns
		}
	}
	return best
}

// fileState names an I/O state by the file that carried most of it in the
// interval, and the stack with the most of that file's time in it.
func (tb *builder) fileState(state string, byFile map[int]int64, fileStacks map[int]map[int]int64) (string, map[string]any) {
	type fw struct {
		id int
		ns int64
	}
	var fs []fw
	for id, ns := range byFile {
		if ns > 0 {
			fs = append(fs, fw{id, ns})
		}
	}
	if len(fs) == 0 {
		return state, nil
	}
	slices.SortFunc(fs, func(a, b fw) int { return cmp.Or(cmp.Compare(b.ns, a.ns), cmp.Compare(a.id, b.id)) })
	top := tb.filePath(fs[0].id)
	name := state + " " + path.Base(top)
	if len(fs) > 1 {
		name += fmt.Sprintf(" (+%d)", len(fs)-1)
	}
	args := map[string]any{"file": top}
	idx := topStack(fileStacks[fs[0].id])
	if f := tb.r.FileByID(fs[0].id); idx == 0 && len(tb.r.SampleStacks) == 0 && f != nil && len(f.Stacks) > 0 {
		// A record without stacks per interval: the file's stack with
		// the most time over the run.
		idx = f.Stacks[0].Stack
	}
	if site := format.CallSite(tb.r.StackAt(idx)); site != "" {
		args["stack"] = site
	}
	if len(fs) > 1 {
		var all []string
		for _, f := range fs {
			all = append(all, tb.filePath(f.id))
		}
		args["files"] = all
	}
	return name, args
}

func (tb *builder) filePath(id int) string {
	if f := tb.r.FileByID(id); f != nil {
		return f.Name()
	}
	return fmt.Sprintf("(file #%d)", id)
}

// ---- phases and compiles ----

func (tb *builder) phases() {
	for _, ph := range tb.res.Phases {
		args := map[string]any{"dominant": string(ph.Dominant)}
		for _, s := range ph.Split {
			if s.NS > 0 {
				args[string(s.Category)+"_ms"] = millis(s.NS)
			}
		}
		tb.slice(ph.Name, "phase", RunPID, phasesTID, ph.StartNS, ph.EndNS, args)
	}
}

func millis(ns int64) float64 { return math.Round(float64(ns)/1e3) / 1e3 }

type laneSlice struct {
	start, end int64
	name       string
	args       map[string]any
}

func (tb *builder) compiles() {
	r := tb.r
	var cs []laneSlice
	windowed := map[int32]bool{}
	comm := map[int32]string{}
	stackOf := map[int32]int{}
	for _, p := range r.Processes {
		if _, ok := comm[p.PID]; !ok {
			comm[p.PID] = p.Comm
			stackOf[p.PID] = p.Stack
		}
	}
	compilers := map[string]bool{}
	if r.JIT != nil {
		for _, c := range r.JIT.Compilers {
			compilers[c.Name] = true
		}
		for _, w := range r.JIT.Windows {
			kind := cmp.Or(w.Kind, "in_process")
			src := cmp.Or(w.Source, kind)
			name := src
			switch kind {
			case "compiler":
				name = format.ProcessLabel(w.PID, cmp.Or(comm[w.PID], src))
				windowed[w.PID] = true
			case "in_process":
				name = src + " JIT (" + format.ProcessLabel(w.PID, comm[w.PID]) + ")"
			case "uprobe":
				name = src + " (" + format.ProcessLabel(w.PID, comm[w.PID]) + ")"
			}
			// A window's own stack (the call a uprobe timed, the miss
			// of an in-process compile) names its line better than
			// the stack its process was forked from.
			stack := cmp.Or(w.Stack, stackOf[w.PID])
			cs = append(cs, laneSlice{start: max(w.StartNS, 0), end: w.EndNS, name: name,
				args: tb.withStack(map[string]any{"kind": kind, "source": src, "pid": w.PID, "cpu_ms": millis(w.CPUNS)}, stack)})
		}
	}
	for _, p := range r.Processes {
		if windowed[p.PID] || !compilers[p.Comm] {
			continue
		}
		end := p.EndNS
		if end == 0 {
			end = max(tb.res.WallNS, p.StartNS)
		}
		cs = append(cs, laneSlice{start: max(p.StartNS, 0), end: end, name: format.ProcessLabel(p.PID, p.Comm),
			args: tb.withStack(map[string]any{"kind": "compiler", "source": p.Comm, "pid": p.PID, "cpu_ms": millis(p.CPUNS)}, p.Stack)})
	}
	tb.lanes("compile", compileTID, 1, "compile", cs)

	var ds []laneSlice
	for _, d := range r.Downloads {
		name := d.Name
		if name == "" {
			name = path.Base(attribution.DownloadKey(d))
		}
		args := map[string]any{"path": attribution.DownloadKey(d), "bytes": d.Bytes, "pid": d.PID,
			"peer": cmp.Or(d.Host, d.Peer), "MB/s": round3(d.MBPerSecond())}
		if len(d.Stacks) > 0 {
			args = tb.withStack(args, d.Stacks[0].Stack)
		}
		ds = append(ds, laneSlice{start: max(d.StartNS, 0), end: d.EndNS, name: "download " + name, args: args})
	}
	tb.lanes("download", downloadTID, 50, "download", ds)
}

// lanes puts slices on tracks of the run process named label, label 2, …
// (tids baseTID, baseTID+1, …): each slice on the first track that is
// free when it starts, so that no two slices on a track overlap.
func (tb *builder) lanes(label string, baseTID, sortBase int, cat string, cs []laneSlice) {
	slices.SortStableFunc(cs, func(a, b laneSlice) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end))
	})
	var laneEnd []int64
	for _, c := range cs {
		if c.end <= c.start {
			continue
		}
		lane := -1
		for i, e := range laneEnd {
			if e <= c.start {
				lane = i
				break
			}
		}
		if lane < 0 {
			lane = len(laneEnd)
			laneEnd = append(laneEnd, 0)
			name := label
			if lane > 0 {
				name = fmt.Sprintf("%s %d", label, lane+1)
			}
			tb.addMeta("thread_name", RunPID, int64(baseTID+lane), map[string]any{"name": name})
			tb.addMeta("thread_sort_index", RunPID, int64(baseTID+lane), map[string]any{"sort_index": sortBase + lane})
		}
		laneEnd[lane] = c.end
		tb.slice(c.name, cat, RunPID, int64(baseTID+lane), c.start, c.end, c.args)
	}
}

// ---- counters ----

func (tb *builder) diskCounters(groups []interval) {
	if len(groups) == 0 {
		return
	}
	page := uint64(tb.r.Host.PageSize)
	if page == 0 {
		page = 4096
	}
	for _, g := range groups {
		var missed uint64
		for _, s := range g.samples {
			for _, fd := range s.Files {
				missed += fd.PagesMissed
			}
		}
		secs := float64(g.end-g.start) / 1e9
		tb.counter("disk read", RunPID, g.start, map[string]any{"MB/s": round3(float64(missed*page) / 1e6 / secs)})
		tb.counter("page-cache misses", RunPID, g.start, map[string]any{"pages/s": round3(float64(missed) / secs)})
	}
	last := groups[len(groups)-1].end
	tb.counter("disk read", RunPID, last, map[string]any{"MB/s": 0})
	tb.counter("page-cache misses", RunPID, last, map[string]any{"pages/s": 0})
}

// networkCounter is the downloads' receive rate: each download's bytes
// per polled interval, summed over the downloads in flight.
func (tb *builder) networkCounter() {
	type step struct {
		t    int64
		rate float64 // bytes per ns, added from t on
	}
	var steps []step
	add := func(lo, hi int64, bytes uint64) {
		r := float64(bytes) / float64(hi-lo)
		steps = append(steps, step{lo, r}, step{hi, -r})
	}
	for _, d := range tb.r.Downloads {
		lo := d.StartNS
		var carry uint64
		for _, x := range d.Samples {
			// Bytes counted at the first byte itself join the next
			// interval.
			if x.EndNS <= lo {
				carry += x.Bytes
				continue
			}
			add(lo, x.EndNS, x.Bytes+carry)
			lo, carry = x.EndNS, 0
		}
		if len(d.Samples) == 0 && d.EndNS > d.StartNS {
			add(d.StartNS, d.EndNS, d.Bytes)
		}
	}
	if len(steps) == 0 {
		return
	}
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.t, b.t) })
	var rate float64
	for i, st := range steps {
		rate += st.rate
		if i+1 < len(steps) && steps[i+1].t == st.t {
			continue
		}
		tb.counter("network receive", RunPID, st.t, map[string]any{"MB/s": round3(max(rate, 0) * 1e3)})
	}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// sliceCounters show the breakdown's split of each slice, in percent: a
// stacked counter of which category the rule gave the time to.
func (tb *builder) sliceCounters() {
	var last int64 = -1
	for _, s := range tb.res.Slices {
		d := s.EndNS - s.StartNS
		if d <= 0 {
			continue
		}
		args := map[string]any{}
		for _, c := range attribution.Categories {
			args[string(c)] = round3(100 * float64(s.Split.Get(c)) / float64(d))
		}
		tb.counter("attributed to (%)", RunPID, s.StartNS, args)
		last = s.EndNS
	}
	if last >= 0 {
		args := map[string]any{}
		for _, c := range attribution.Categories {
			args[string(c)] = 0
		}
		tb.counter("attributed to (%)", RunPID, last, args)
	}
}

func (tb *builder) gpuCounters() {
	g := tb.r.GPU
	if g == nil || g.Unavailable != "" {
		return
	}
	for _, d := range g.Devices {
		ss := g.DeviceSamples(d.Index)
		util := fmt.Sprintf("GPU %d utilization", d.Index)
		vram := fmt.Sprintf("GPU %d VRAM", d.Index)
		for i, s := range ss {
			if s.Has(record.GPUFieldMemUsed) {
				tb.counter(vram, RunPID, s.TNS, map[string]any{"GiB": round3(float64(s.MemUsedBytes) / (1 << 30))})
			}
			// A sample's utilization covers the time since the one before.
			if i > 0 && s.Has(record.GPUFieldUtil) && s.TNS > ss[i-1].TNS {
				tb.counter(util, RunPID, ss[i-1].TNS, map[string]any{"%": s.UtilGPUPct})
			}
		}
		if n := len(ss); n > 1 {
			tb.counter(util, RunPID, ss[n-1].TNS, map[string]any{"%": 0})
		}
	}
}

// withStack adds to a slice's args the call site of Python stack idx
// (1 + its index in the record's stacks), when it has one.
func (tb *builder) withStack(args map[string]any, idx int) map[string]any {
	if site := format.CallSite(tb.r.StackAt(idx)); site != "" {
		args["stack"] = site
	}
	return args
}
