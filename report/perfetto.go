package report

import (
	"bytes"
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
)

// The timeline's synthetic process, which holds the run-wide tracks
// (phases, compile slices, counters). Its pid is above any Linux pid
// (pid_max is at most 2^22) and fits an int32.
const (
	TimelineRunPID = 0x7fff0000

	tlPhasesTID   = 1
	tlCompileTID  = 100  // compile lanes are 100, 101, …
	tlDownloadTID = 1000 // download lanes are 1000, 1001, …
)

// WritePerfetto writes r as a Chrome trace-event JSON document, the format
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
// A synthetic process "coldtrace" (pid TimelineRunPID) holds the phases
// track, compile tracks (JIT windows and compiler processes, spread over
// lanes so that no two overlap), download tracks, and counters: disk read MB/s and
// page-cache misses/s (pages missed × page size per interval), the
// breakdown's split of each slice in percent, and per GPU utilization and
// VRAM. Timestamps are microseconds since the command was released, with
// nanosecond digits.
func WritePerfetto(w io.Writer, r *record.Record, res *attribution.Result) error {
	if r == nil {
		return errors.New("timeline: no record")
	}
	if res == nil {
		res = attribution.Analyze(r)
	}
	tb := &tlBuilder{r: r, res: res}
	tb.build()
	doc := tlDoc{
		TraceEvents:     tb.events(),
		DisplayTimeUnit: "ms",
		OtherData: map[string]string{
			"command":   strings.Join(r.Command, " "),
			"wall":      attribution.FormatDuration(res.WallNS),
			"exit_code": strconv.Itoa(r.ExitCode),
			"verdict":   res.Verdict,
			"rule":      res.Rule,
			"schema":    record.Schema,
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

type tlDoc struct {
	TraceEvents     []*tlEvent        `json:"traceEvents"`
	DisplayTimeUnit string            `json:"displayTimeUnit"`
	OtherData       map[string]string `json:"otherData"`
}

// tlMicros is a time in nanoseconds, written as microseconds with three
// decimals, so that ts+dur is exact in the file.
type tlMicros int64

func (t tlMicros) MarshalJSON() ([]byte, error) {
	v := int64(t)
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return []byte(fmt.Sprintf("%s%d.%03d", sign, v/1000, v%1000)), nil
}

type tlEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   tlMicros       `json:"ts"`
	Dur  *tlMicros      `json:"dur,omitempty"`
	PID  int64          `json:"pid"`
	TID  int64          `json:"tid"`
	Args map[string]any `json:"args,omitempty"`

	end int64 // ns, for X events
}

type tlBuilder struct {
	r    *record.Record
	res  *attribution.Result
	meta []*tlEvent
	evs  []*tlEvent

	lastCounter map[string]string
}

func (tb *tlBuilder) build() {
	tb.metadata()
	groups := tlIntervals(tb.r.Samples)
	tb.threads(groups)
	tb.phases()
	tb.compiles()
	tb.diskCounters(groups)
	tb.sliceCounters()
	tb.gpuCounters()
}

// events returns metadata first, then every other event by time; at equal
// times longer slices come first so that parents precede their children.
func (tb *tlBuilder) events() []*tlEvent {
	slices.SortStableFunc(tb.evs, func(a, b *tlEvent) int {
		return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(b.end-int64(b.TS), a.end-int64(a.TS)))
	})
	return append(append([]*tlEvent{}, tb.meta...), tb.evs...)
}

func (tb *tlBuilder) addMeta(name string, pid, tid int64, args map[string]any) {
	tb.meta = append(tb.meta, &tlEvent{Name: name, Cat: "__metadata", Ph: "M", PID: pid, TID: tid, Args: args})
}

// slice adds a complete event; empty or inverted spans are dropped.
func (tb *tlBuilder) slice(name, cat string, pid, tid, start, end int64, args map[string]any) *tlEvent {
	start = max(start, 0)
	if end <= start {
		return nil
	}
	d := tlMicros(end - start)
	e := &tlEvent{Name: name, Cat: cat, Ph: "X", TS: tlMicros(start), Dur: &d, PID: pid, TID: tid, Args: args, end: end}
	tb.evs = append(tb.evs, e)
	return e
}

// counter adds a counter value; a value equal to the counter's last one
// adds nothing (a counter holds its value until the next event).
func (tb *tlBuilder) counter(name string, pid, ts int64, args map[string]any) {
	v := fmt.Sprint(args) // fmt sorts map keys
	k := fmt.Sprintf("%d/%s", pid, name)
	if last, ok := tb.lastCounter[k]; ok && last == v {
		return
	}
	if tb.lastCounter == nil {
		tb.lastCounter = map[string]string{}
	}
	tb.lastCounter[k] = v
	tb.evs = append(tb.evs, &tlEvent{Name: name, Cat: "counter", Ph: "C", TS: tlMicros(max(ts, 0)), PID: pid, Args: args, end: max(ts, 0)})
}

// tlInterval is the samples that cover (start, end]: cut at the samples'
// end times the way attribution cuts slices, with samples that end at or
// before the previous cut merged into the interval before.
type tlInterval struct {
	start, end int64
	samples    []*record.Sample
}

func tlIntervals(samples []record.Sample) []tlInterval {
	ss := make([]*record.Sample, len(samples))
	for i := range samples {
		ss[i] = &samples[i]
	}
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].EndNS < ss[j].EndNS })
	var out []tlInterval
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
		out = append(out, tlInterval{start: prev, end: s.EndNS, samples: append(pending, s)})
		pending = nil
		prev = s.EndNS
	}
	return out
}

// ---- processes and threads ----

func (tb *tlBuilder) metadata() {
	r := tb.r
	tb.addMeta("process_name", TimelineRunPID, 0, map[string]any{"name": "coldtrace: " + tlTrim(strings.Join(r.Command, " "), 80)})
	tb.addMeta("process_sort_index", TimelineRunPID, 0, map[string]any{"sort_index": -1})
	tb.addMeta("thread_name", TimelineRunPID, tlPhasesTID, map[string]any{"name": "phases"})
	tb.addMeta("thread_sort_index", TimelineRunPID, tlPhasesTID, map[string]any{"sort_index": 0})

	named := map[int32]bool{}
	for i, p := range r.Processes {
		if named[p.PID] {
			continue
		}
		named[p.PID] = true
		name := p.Comm
		if name == "" && p.Exe != "" {
			name = path.Base(p.Exe)
		}
		if len(p.Args) > 0 {
			name += " (" + tlTrim(strings.Join(p.Args, " "), 60) + ")"
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

func tlTrim(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// tlState is one state of a thread inside an interval.
type tlState struct {
	name, cat string
	ns        int64
	args      map[string]any
}

func (tb *tlBuilder) threads(groups []tlInterval) {
	type key struct{ pid, tid int32 }
	open := map[key]*tlEvent{}
	for _, g := range groups {
		deltas := map[key]*record.ThreadDelta{}
		var order []key
		ioFile, fillFile := map[int]int64{}, map[int]int64{}
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
			}
		}
		ioName, ioArgs := tb.fileState("I/O wait", ioFile)
		fillName, fillArgs := tb.fileState("page-cache fill", fillFile)
		length := g.end - g.start
		for _, k := range order {
			d := deltas[k]
			miss := min(d.MissCPUNS, d.CPUNS)
			states := []tlState{
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
				if e := open[k]; e != nil && e.Name == st.name && e.end == t {
					e.end = end
					*e.Dur = tlMicros(end - int64(e.TS))
				} else {
					open[k] = tb.slice(st.name, st.cat, int64(k.pid), int64(k.tid), t, end, st.args)
				}
				t = end
			}
		}
	}
}

// fileState names an I/O state by the file that carried most of it in the
// interval.
func (tb *tlBuilder) fileState(state string, byFile map[int]int64) (string, map[string]any) {
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
	if len(fs) > 1 {
		var all []string
		for _, f := range fs {
			all = append(all, tb.filePath(f.id))
		}
		args["files"] = all
	}
	return name, args
}

func (tb *tlBuilder) filePath(id int) string {
	files := tb.r.Files
	var f *record.File
	if id >= 0 && id < len(files) && files[id].ID == id {
		f = &files[id]
	} else {
		for i := range files {
			if files[i].ID == id {
				f = &files[i]
				break
			}
		}
	}
	switch {
	case f == nil:
		return fmt.Sprintf("(file #%d)", id)
	case f.Path == "":
		return fmt.Sprintf("(dev %d:%d inode %d)", f.Dev>>20, f.Dev&(1<<20-1), f.Ino)
	}
	return f.Path
}

// ---- phases and compiles ----

func (tb *tlBuilder) phases() {
	for _, ph := range tb.res.Phases {
		args := map[string]any{"dominant": string(ph.Dominant)}
		for _, s := range ph.Split {
			if s.NS > 0 {
				args[string(s.Category)+"_ms"] = tlMS(s.NS)
			}
		}
		tb.slice(ph.Name, "phase", TimelineRunPID, tlPhasesTID, ph.StartNS, ph.EndNS, args)
	}
}

func tlMS(ns int64) float64 { return math.Round(float64(ns)/1e3) / 1e3 }

type tlCompile struct {
	start, end int64
	name       string
	args       map[string]any
}

func (tb *tlBuilder) compiles() {
	r := tb.r
	var cs []tlCompile
	windowed := map[int32]bool{}
	comm := map[int32]string{}
	for _, p := range r.Processes {
		if _, ok := comm[p.PID]; !ok {
			comm[p.PID] = p.Comm
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
				name = ppProcName(w.PID, cmp.Or(comm[w.PID], src))
				windowed[w.PID] = true
			case "in_process":
				name = src + " JIT (" + ppProcName(w.PID, comm[w.PID]) + ")"
			case "uprobe":
				name = src + " (" + ppProcName(w.PID, comm[w.PID]) + ")"
			}
			cs = append(cs, tlCompile{start: max(w.StartNS, 0), end: w.EndNS, name: name,
				args: map[string]any{"kind": kind, "source": src, "pid": w.PID, "cpu_ms": tlMS(w.CPUNS)}})
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
		cs = append(cs, tlCompile{start: max(p.StartNS, 0), end: end, name: ppProcName(p.PID, p.Comm),
			args: map[string]any{"kind": "compiler", "source": p.Comm, "pid": p.PID, "cpu_ms": tlMS(p.CPUNS)}})
	}
	tb.lanes("compile", tlCompileTID, 1, "compile", cs)

	var ds []tlCompile
	for _, d := range r.Downloads {
		p := cmp.Or(d.Path, "(unknown path)")
		ds = append(ds, tlCompile{start: max(d.StartNS, 0), end: d.EndNS, name: "download " + path.Base(p),
			args: map[string]any{"path": p, "bytes": d.Bytes, "pid": d.PID}})
	}
	tb.lanes("download", tlDownloadTID, 50, "download", ds)
}

// lanes puts slices on tracks of the run process named label, label 2, …
// (tids baseTID, baseTID+1, …): each slice on the first track that is
// free when it starts, so that no two slices on a track overlap.
func (tb *tlBuilder) lanes(label string, baseTID, sortBase int, cat string, cs []tlCompile) {
	slices.SortStableFunc(cs, func(a, b tlCompile) int {
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
			tb.addMeta("thread_name", TimelineRunPID, int64(baseTID+lane), map[string]any{"name": name})
			tb.addMeta("thread_sort_index", TimelineRunPID, int64(baseTID+lane), map[string]any{"sort_index": sortBase + lane})
		}
		laneEnd[lane] = c.end
		tb.slice(c.name, cat, TimelineRunPID, int64(baseTID+lane), c.start, c.end, c.args)
	}
}

// ---- counters ----

func (tb *tlBuilder) diskCounters(groups []tlInterval) {
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
		tb.counter("disk read", TimelineRunPID, g.start, map[string]any{"MB/s": tlRound(float64(missed*page) / 1e6 / secs)})
		tb.counter("page-cache misses", TimelineRunPID, g.start, map[string]any{"pages/s": tlRound(float64(missed) / secs)})
	}
	last := groups[len(groups)-1].end
	tb.counter("disk read", TimelineRunPID, last, map[string]any{"MB/s": 0})
	tb.counter("page-cache misses", TimelineRunPID, last, map[string]any{"pages/s": 0})
}

func tlRound(v float64) float64 { return math.Round(v*1000) / 1000 }

// sliceCounters show the breakdown's split of each slice, in percent: a
// stacked counter of which category the rule gave the time to.
func (tb *tlBuilder) sliceCounters() {
	var last int64 = -1
	for _, s := range tb.res.Slices {
		d := s.EndNS - s.StartNS
		if d <= 0 {
			continue
		}
		args := map[string]any{}
		for _, c := range attribution.Categories {
			args[string(c)] = tlRound(100 * float64(s.Split.Get(c)) / float64(d))
		}
		tb.counter("attributed to (%)", TimelineRunPID, s.StartNS, args)
		last = s.EndNS
	}
	if last >= 0 {
		args := map[string]any{}
		for _, c := range attribution.Categories {
			args[string(c)] = 0
		}
		tb.counter("attributed to (%)", TimelineRunPID, last, args)
	}
}

func (tb *tlBuilder) gpuCounters() {
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
				tb.counter(vram, TimelineRunPID, s.TNS, map[string]any{"GiB": tlRound(float64(s.MemUsedBytes) / (1 << 30))})
			}
			// A sample's utilization covers the time since the one before.
			if i > 0 && s.Has(record.GPUFieldUtil) && s.TNS > ss[i-1].TNS {
				tb.counter(util, TimelineRunPID, ss[i-1].TNS, map[string]any{"%": s.UtilGPUPct})
			}
		}
		if n := len(ss); n > 1 {
			tb.counter(util, TimelineRunPID, ss[n-1].TNS, map[string]any{"%": 0})
		}
	}
}

// ---- validation ----

// ValidateTimeline checks a Chrome trace-event JSON document the way the
// timeline's consumers read it: the document is an object with a
// traceEvents array (or a bare array); every event has the fields its
// phase requires (X: name, ts, dur ≥ 0, pid, tid; C: name, ts, pid and
// numeric args; M: a known metadata name, pid, and its args; B/E and
// instant events likewise); within each thread track timestamps never go
// back and complete events nest properly (none partially overlaps
// another); each counter's timestamps never go back.
func ValidateTimeline(data []byte) error {
	var evs []map[string]json.RawMessage
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &evs); err != nil {
			return fmt.Errorf("timeline: %w", err)
		}
	} else {
		var doc struct {
			TraceEvents     []map[string]json.RawMessage `json:"traceEvents"`
			DisplayTimeUnit string                       `json:"displayTimeUnit"`
		}
		if err := json.Unmarshal(trimmed, &doc); err != nil {
			return fmt.Errorf("timeline: %w", err)
		}
		if doc.TraceEvents == nil {
			return errors.New("timeline: no traceEvents array")
		}
		if u := doc.DisplayTimeUnit; u != "" && u != "ms" && u != "ns" {
			return fmt.Errorf("timeline: displayTimeUnit %q is neither ms nor ns", u)
		}
		evs = doc.TraceEvents
	}
	type track struct{ pid, tid int64 }
	type open struct {
		end  int64
		name string
	}
	lastTS := map[track]int64{}
	stacks := map[track][]open{}
	counterTS := map[string]int64{}
	for i, ev := range evs {
		fail := func(format string, a ...any) error {
			return fmt.Errorf("timeline: event %d: %s", i, fmt.Sprintf(format, a...))
		}
		ph, err := tlString(ev, "ph")
		if err != nil {
			return fail("%v", err)
		}
		need := func(fields ...string) error {
			for _, f := range fields {
				if _, ok := ev[f]; !ok {
					return fail("ph %q without %q", ph, f)
				}
			}
			return nil
		}
		switch ph {
		case "X", "B", "E", "i", "I", "C":
			if err := need("ts", "pid"); err != nil {
				return err
			}
		case "M":
			if err := need("pid", "args"); err != nil {
				return err
			}
		default:
			return fail("unexpected phase %q", ph)
		}
		name, nameErr := tlString(ev, "name")
		if ph != "E" && (nameErr != nil || name == "") {
			return fail("ph %q needs a non-empty name", ph)
		}
		pid, err := tlInt(ev, "pid")
		if err != nil {
			return fail("%v", err)
		}
		var ts int64
		if ph != "M" {
			if ts, err = tlNS(ev, "ts"); err != nil {
				return fail("%v", err)
			}
		}
		var tid int64
		if ph == "X" || ph == "B" || ph == "E" || ph == "i" || ph == "I" || (ph == "M" && strings.HasPrefix(name, "thread_")) {
			if err := need("tid"); err != nil {
				return err
			}
			if tid, err = tlInt(ev, "tid"); err != nil {
				return fail("%v", err)
			}
		}
		tr := track{pid, tid}
		switch ph {
		case "M":
			var args map[string]json.RawMessage
			if err := json.Unmarshal(ev["args"], &args); err != nil {
				return fail("metadata args: %v", err)
			}
			switch name {
			case "process_name", "thread_name", "process_labels":
				if _, err := tlString(args, "name"); err != nil && name != "process_labels" {
					return fail("%s: %v", name, err)
				}
			case "process_sort_index", "thread_sort_index":
				if _, err := tlInt(args, "sort_index"); err != nil {
					return fail("%s: %v", name, err)
				}
			default:
				return fail("unknown metadata event %q", name)
			}
			continue
		case "C":
			var args map[string]json.RawMessage
			if err := need("args"); err != nil {
				return err
			}
			if err := json.Unmarshal(ev["args"], &args); err != nil || len(args) == 0 {
				return fail("counter %q needs an args object with values", name)
			}
			for k, v := range args {
				if _, err := strconv.ParseFloat(string(v), 64); err != nil {
					return fail("counter %q: arg %q is not a number: %s", name, k, v)
				}
			}
			ck := fmt.Sprintf("%d/%s", pid, name)
			if last, ok := counterTS[ck]; ok && ts < last {
				return fail("counter %q goes back in time (%d ns after %d ns)", name, ts, last)
			}
			counterTS[ck] = ts
			continue
		case "i", "I":
			if s, err := tlString(ev, "s"); err == nil && s != "g" && s != "p" && s != "t" {
				return fail("instant scope %q", s)
			}
		}
		if last, ok := lastTS[tr]; ok && ts < last {
			return fail("track %d/%d goes back in time (%d ns after %d ns)", pid, tid, ts, last)
		}
		lastTS[tr] = ts
		st := stacks[tr]
		for len(st) > 0 && st[len(st)-1].end <= ts && ph != "E" {
			st = st[:len(st)-1]
		}
		switch ph {
		case "X":
			if err := need("dur"); err != nil {
				return err
			}
			dur, err := tlNS(ev, "dur")
			if err != nil {
				return fail("%v", err)
			}
			if dur < 0 {
				return fail("negative dur")
			}
			if n := len(st); n > 0 && ts+dur > st[n-1].end {
				return fail("%q [%d, %d] overlaps %q (ends %d) on track %d/%d without nesting",
					name, ts, ts+dur, st[n-1].name, st[n-1].end, pid, tid)
			}
			st = append(st, open{end: ts + dur, name: name})
		case "B":
			st = append(st, open{end: math.MaxInt64, name: name})
		case "E":
			if len(st) == 0 || st[len(st)-1].end != math.MaxInt64 {
				return fail("E without a matching B on track %d/%d", pid, tid)
			}
			st = st[:len(st)-1]
		}
		stacks[tr] = st
	}
	return nil
}

func tlString(m map[string]json.RawMessage, k string) (string, error) {
	raw, ok := m[k]
	if !ok {
		return "", fmt.Errorf("no %q", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%q is not a string: %s", k, raw)
	}
	return s, nil
}

func tlInt(m map[string]json.RawMessage, k string) (int64, error) {
	raw, ok := m[k]
	if !ok {
		return 0, fmt.Errorf("no %q", k)
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer: %s", k, raw)
	}
	return v, nil
}

// tlNS reads a time in microseconds as whole nanoseconds.
func tlNS(m map[string]json.RawMessage, k string) (int64, error) {
	raw, ok := m[k]
	if !ok {
		return 0, fmt.Errorf("no %q", k)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%q is not a number: %s", k, raw)
	}
	return int64(math.Round(f * 1000)), nil
}
