package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/timelinecheck"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// parsedEvent is a timeline read back with times in nanoseconds.
type parsedEvent struct {
	Ph   string
	Name string
	Cat  string
	PID  int64
	TID  int64
	TS   int64
	Dur  int64
	Args map[string]any
}

func parseTimeline(t *testing.T, data []byte) []parsedEvent {
	t.Helper()
	var doc struct {
		TraceEvents []map[string]json.RawMessage `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("timeline is not JSON: %v", err)
	}
	var out []parsedEvent
	for i, ev := range doc.TraceEvents {
		var p parsedEvent
		str := func(k string) string {
			var s string
			if raw, ok := ev[k]; ok {
				if err := json.Unmarshal(raw, &s); err != nil {
					t.Fatalf("event %d: %s is not a string: %s", i, k, raw)
				}
			}
			return s
		}
		num := func(k string, micros bool) int64 {
			raw, ok := ev[k]
			if !ok {
				return math.MinInt64
			}
			var f float64
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatalf("event %d: %s is not a number: %s", i, k, raw)
			}
			if micros {
				return int64(math.Round(f * 1000))
			}
			return int64(f)
		}
		p.Ph, p.Name, p.Cat = str("ph"), str("name"), str("cat")
		p.PID, p.TID = num("pid", false), num("tid", false)
		p.TS, p.Dur = num("ts", true), num("dur", true)
		if raw, ok := ev["args"]; ok {
			if err := json.Unmarshal(raw, &p.Args); err != nil {
				t.Fatalf("event %d: args: %v", i, err)
			}
		}
		// Required fields by phase (Trace Event Format).
		missing := func(fields ...string) {
			for _, f := range fields {
				if _, ok := ev[f]; !ok {
					t.Errorf("event %d (%s %q) has no %q", i, p.Ph, p.Name, f)
				}
			}
		}
		switch p.Ph {
		case "X":
			missing("name", "ts", "dur", "pid", "tid")
			if p.Dur <= 0 {
				t.Errorf("event %d: X %q with dur %d", i, p.Name, p.Dur)
			}
		case "C":
			missing("name", "ts", "pid", "args")
			if len(p.Args) == 0 {
				t.Errorf("event %d: counter %q without values", i, p.Name)
			}
			for k, v := range p.Args {
				if _, ok := v.(float64); !ok {
					t.Errorf("event %d: counter %q arg %q = %v is not a number", i, p.Name, k, v)
				}
			}
		case "M":
			missing("name", "pid", "args")
			switch p.Name {
			case "process_name", "thread_name":
				if s, ok := p.Args["name"].(string); !ok || s == "" {
					t.Errorf("event %d: %s without a name: %v", i, p.Name, p.Args)
				}
			case "process_sort_index", "thread_sort_index":
				if _, ok := p.Args["sort_index"].(float64); !ok {
					t.Errorf("event %d: %s without sort_index", i, p.Name)
				}
			default:
				t.Errorf("event %d: unknown metadata %q", i, p.Name)
			}
			if strings.HasPrefix(p.Name, "thread_") {
				missing("tid")
			}
		default:
			t.Errorf("event %d: unexpected phase %q", i, p.Ph)
		}
		if p.Ph != "M" && p.TS < 0 {
			t.Errorf("event %d: %q at negative time %d", i, p.Name, p.TS)
		}
		out = append(out, p)
	}
	return out
}

// checkTracks checks the timeline's structure on its own terms: per
// thread track, timestamps never go back and X events nest (no partial
// overlap); per counter, timestamps never go back.
func checkTracks(t *testing.T, evs []parsedEvent) {
	t.Helper()
	type track struct{ pid, tid int64 }
	last := map[track]int64{}
	stack := map[track][]int64{}
	counter := map[string]int64{}
	for i, e := range evs {
		switch e.Ph {
		case "X":
			k := track{e.PID, e.TID}
			if l, ok := last[k]; ok && e.TS < l {
				t.Errorf("event %d %q: track %v goes back from %d to %d", i, e.Name, k, l, e.TS)
			}
			last[k] = e.TS
			st := stack[k]
			for len(st) > 0 && st[len(st)-1] <= e.TS {
				st = st[:len(st)-1]
			}
			if len(st) > 0 && e.TS+e.Dur > st[len(st)-1] {
				t.Errorf("event %d %q [%d,%d] partially overlaps a slice ending %d on track %v", i, e.Name, e.TS, e.TS+e.Dur, st[len(st)-1], k)
			}
			stack[k] = append(st, e.TS+e.Dur)
		case "C":
			k := fmt.Sprintf("%d/%s", e.PID, e.Name)
			if l, ok := counter[k]; ok && e.TS < l {
				t.Errorf("event %d: counter %s goes back from %d to %d", i, k, l, e.TS)
			}
			counter[k] = e.TS
		}
	}
}

func writeTimeline(t *testing.T, r *record.Record, res *attribution.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, r, res); err != nil {
		t.Fatal(err)
	}
	if err := timelinecheck.Validate(buf.Bytes()); err != nil {
		t.Fatalf("ValidateTimeline: %v", err)
	}
	return buf.Bytes()
}

func TestPerfettoValid(t *testing.T) {
	for name, r := range fixtures.All(t) {
		t.Run(name, func(t *testing.T) {
			res := attribution.Analyze(r)
			evs := parseTimeline(t, writeTimeline(t, r, res))
			checkTracks(t, evs)

			// Every thread has a named track, every process a name.
			threadNames := map[[2]int64]string{}
			procNames := map[int64]bool{}
			for _, e := range evs {
				if e.Ph == "M" && e.Name == "thread_name" {
					threadNames[[2]int64{e.PID, e.TID}] = e.Args["name"].(string)
				}
				if e.Ph == "M" && e.Name == "process_name" {
					procNames[e.PID] = true
				}
			}
			for _, th := range r.Threads {
				if got := threadNames[[2]int64{int64(th.PID), int64(th.TID)}]; got != th.Comm {
					t.Errorf("thread %d/%d named %q, want %q", th.PID, th.TID, got, th.Comm)
				}
			}
			for _, e := range evs {
				if e.Ph != "M" && !procNames[e.PID] {
					t.Errorf("%s %q on pid %d, which has no process_name", e.Ph, e.Name, e.PID)
				}
			}

			// Thread states add up to the deltas, each interval's at most
			// its length (a poll that came late overfills it). The
			// fixtures' samples are in order with distinct times.
			want := map[[2]int64]int64{}
			prev := int64(0)
			for _, s := range r.Samples {
				for _, td := range s.Threads {
					want[[2]int64{int64(td.PID), int64(td.TID)}] += min(td.CPUNS+td.IOWaitNS+td.RunQueueNS+td.OtherWaitNS, s.EndNS-prev)
				}
				prev = s.EndNS
			}
			got := map[[2]int64]int64{}
			for _, e := range evs {
				if e.Ph == "X" && e.PID != RunPID {
					got[[2]int64{e.PID, e.TID}] += e.Dur
				}
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("thread %v: states last %d ns, the samples say %d", k, got[k], w)
				}
			}

			// Phases tile the run.
			var phases []parsedEvent
			for _, e := range evs {
				if e.Ph == "X" && e.PID == RunPID && e.TID == phasesTID {
					phases = append(phases, e)
				}
			}
			if len(phases) != len(res.Phases) {
				t.Fatalf("%d phase slices, want %d", len(phases), len(res.Phases))
			}
			for i, p := range phases {
				if p.TS != res.Phases[i].StartNS || p.TS+p.Dur != res.Phases[i].EndNS || p.Name != res.Phases[i].Name {
					t.Errorf("phase %d: %q [%d,%d], want %q [%d,%d]", i, p.Name, p.TS, p.TS+p.Dur,
						res.Phases[i].Name, res.Phases[i].StartNS, res.Phases[i].EndNS)
				}
			}

			// The disk counter integrates to the bytes that came from disk.
			var mbs []parsedEvent
			for _, e := range evs {
				if e.Ph == "C" && e.Name == "disk read" {
					mbs = append(mbs, e)
				}
			}
			var integral float64
			for i := 0; i+1 < len(mbs); i++ {
				integral += mbs[i].Args["MB/s"].(float64) * 1e6 * float64(mbs[i+1].TS-mbs[i].TS) / 1e9
			}
			var disk float64
			for _, s := range r.Samples {
				for _, fd := range s.Files {
					disk += float64(fd.PagesMissed) * float64(r.Host.PageSize)
				}
			}
			if math.Abs(integral-disk) > 0.001*disk+1 {
				t.Errorf("disk read counter integrates to %.0f bytes, want %.0f", integral, disk)
			}
		})
	}
}

func TestPerfettoColdML(t *testing.T) {
	r, res := fixture(t, "cold-ml")
	evs := parseTimeline(t, writeTimeline(t, r, res))
	counters := map[string]int{}
	var compiles, ioWaits int
	for _, e := range evs {
		switch {
		case e.Ph == "C":
			counters[e.Name]++
		case e.Ph == "X" && e.Cat == "compile":
			compiles++
		case e.Ph == "X" && strings.HasPrefix(e.Name, "I/O wait qwen_image_fp8.safetensors"):
			ioWaits++
			if e.Args["file"] != "/home/dev/models/qwen_image_fp8.safetensors" {
				t.Errorf("I/O wait names file %v", e.Args["file"])
			}
		}
	}
	for _, c := range []string{"disk read", "page-cache misses", "GPU 0 utilization", "GPU 0 VRAM", "attributed to (%)"} {
		if counters[c] == 0 {
			t.Errorf("no %q counter; counters: %v", c, counters)
		}
	}
	if compiles != len(r.JIT.Windows) {
		t.Errorf("%d compile slices, want one per JIT window (%d)", compiles, len(r.JIT.Windows))
	}
	if ioWaits == 0 {
		t.Error("no I/O wait slices on the model file")
	}
}

// TestPerfettoJitter feeds samples that overlap and overfill their
// intervals, out of order, with parallel compiles: the tracks must still
// be monotonic and properly nested.
func TestPerfettoJitter(t *testing.T) {
	ms := int64(1e6)
	r := &record.Record{
		Schema: record.Schema, Command: []string{"x"}, WallNS: 500 * ms, IntervalNS: 100 * ms,
		Host:      record.Host{PageSize: 4096},
		Files:     []record.File{{ID: 0, Path: "/a"}, {ID: 1, Path: "/b"}},
		Processes: []record.Process{{PID: 1, Comm: "x"}, {PID: 2, PPID: 1, Comm: "cc", StartNS: 10 * ms, EndNS: 300 * ms}},
		Threads:   []record.Thread{{PID: 1, TID: 1, Comm: "x"}, {PID: 2, TID: 2, Comm: "cc"}},
		JIT: &record.JIT{
			Compilers: []record.Compiler{{Name: "cc", Runs: 1}},
			Windows: []record.JITWindow{
				{PID: 1, StartNS: 0, EndNS: 200 * ms, Kind: "in_process", Source: "triton"},
				{PID: 1, StartNS: 50 * ms, EndNS: 250 * ms, Kind: "in_process", Source: "triton"},
				{PID: 3, StartNS: 100 * ms, EndNS: 150 * ms, Kind: "compiler", Source: "ptxas"},
			},
		},
		Samples: []record.Sample{
			{EndNS: 210 * ms, Threads: []record.ThreadDelta{{PID: 1, TID: 1, CPUNS: 80 * ms, IOWaitNS: 60 * ms}},
				Files: []record.FileDelta{{File: 0, PagesMissed: 10, IOWaitNS: 40 * ms}, {File: 1, PagesMissed: 5, IOWaitNS: 20 * ms}}},
			{EndNS: 100 * ms, Threads: []record.ThreadDelta{{PID: 1, TID: 1, CPUNS: 100 * ms}, {PID: 2, TID: 2, CPUNS: 90 * ms}}},
			{EndNS: 100 * ms, Threads: []record.ThreadDelta{{PID: 1, TID: 1, OtherWaitNS: 30 * ms}}},
			{EndNS: 290 * ms, Threads: []record.ThreadDelta{{PID: 1, TID: 1, CPUNS: 100 * ms, MissCPUNS: 30 * ms}},
				Files: []record.FileDelta{{File: 1, PagesMissed: 7, MissCPUNS: 30 * ms}}},
			{EndNS: 600 * ms, Threads: []record.ThreadDelta{{PID: 1, TID: 1, RunQueueNS: 5 * ms}}},
		},
	}
	evs := parseTimeline(t, writeTimeline(t, r, nil))
	checkTracks(t, evs)
	lanes := map[int64]bool{}
	for _, e := range evs {
		if e.Ph == "X" && e.Cat == "compile" {
			lanes[e.TID] = true
		}
	}
	if len(lanes) < 3 {
		t.Errorf("overlapping compiles on %d lanes, want 3", len(lanes))
	}
}

// fixture is a recorded run and its attribution.
func fixture(t *testing.T, name string) (*record.Record, *attribution.Result) {
	t.Helper()
	r := fixtures.Record(t, name)
	return r, attribution.Analyze(r)
}

// TestNetworkCounter: two overlapping downloads, one polled, one not: the
// network counter integrates to their bytes, and each has a slice.
func TestNetworkCounter(t *testing.T) {
	ms := int64(1e6)
	r := &record.Record{Schema: record.Schema, Command: []string{"x"}, WallNS: 1000 * ms, IntervalNS: 100 * ms,
		Downloads: []record.Download{
			{Path: "/h/hub/models--o--m/blobs/ab", Name: "model.safetensors", Bytes: 30 << 20, StartNS: 100 * ms, EndNS: 400 * ms,
				Peer: "127.0.0.1:8765", Samples: []record.DownloadSample{{EndNS: 100 * ms, Bytes: 1 << 20},
					{EndNS: 200 * ms, Bytes: 9 << 20}, {EndNS: 300 * ms, Bytes: 10 << 20}, {EndNS: 400 * ms, Bytes: 10 << 20}}},
			{Peer: "10.0.0.1:443", Bytes: 8 << 20, StartNS: 300 * ms, EndNS: 700 * ms},
		}}
	evs := parseTimeline(t, writeTimeline(t, r, attribution.Analyze(r)))
	var net []parsedEvent
	slices := 0
	for _, e := range evs {
		switch {
		case e.Ph == "C" && e.Name == "network receive":
			net = append(net, e)
		case e.Ph == "X" && e.Cat == "download":
			slices++
		}
	}
	var integral float64
	for i := 0; i+1 < len(net); i++ {
		integral += net[i].Args["MB/s"].(float64) * 1e6 * float64(net[i+1].TS-net[i].TS) / 1e9
	}
	if want := float64(38 << 20); math.Abs(integral-want) > 0.001*want {
		t.Errorf("network counter integrates to %.0f bytes, want %.0f (%d values)", integral, want, len(net))
	}
	if len(net) == 0 || net[len(net)-1].Args["MB/s"].(float64) != 0 || net[len(net)-1].TS != 700*ms {
		t.Errorf("the counter does not drop to 0 at the last byte: %+v", net)
	}
	if slices != 2 {
		t.Errorf("%d download slices, want 2", slices)
	}
}

// TestSlicesCarryTheirStack: an I/O-wait slice names its file's stack
// with the most time, a download slice its download's.
func TestSlicesCarryTheirStack(t *testing.T) {
	r := &record.Record{
		WallNS: 2e9, IntervalNS: 1e9,
		Stacks: []record.PyStack{
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 12, Func: "load"}}},
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 30, Func: "fetch"}}},
		},
		Files: []record.File{{ID: 0, Path: "/m/w.bin", PagesMissed: 10, IOWaitNS: 1e9,
			Stacks: []record.StackCharge{{Stack: 1, PID: 7, NS: 1e9}}}},
		Downloads: []record.Download{{Path: "/m/x.bin", Bytes: 8 << 20, StartNS: 1e9, EndNS: 2e9, PID: 7,
			Stacks: []record.StackCharge{{Stack: 2, PID: 7, NS: 1e9, Bytes: 8 << 20}}}},
		Samples: []record.Sample{{EndNS: 1e9, Files: []record.FileDelta{{File: 0, PagesMissed: 10, IOWaitNS: 1e9}},
			Threads: []record.ThreadDelta{{TID: 7, PID: 7, IOWaitNS: 1e9}}}, {EndNS: 2e9}},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 2e9}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, r, attribution.Analyze(r)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"stack":"main.py:12 load"`, `"stack":"main.py:30 fetch"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %s in the timeline", want)
		}
	}
}

// TestSlicesNameTheStackOfTheirInterval: a file read from one line, then
// from another, gives slices naming each interval's own stack, though
// the second line has the most time over the run.
func TestSlicesNameTheStackOfTheirInterval(t *testing.T) {
	r := &record.Record{
		WallNS: 2e9, IntervalNS: 1e9,
		Stacks: []record.PyStack{
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 12, Func: "head"}}},
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 30, Func: "rest"}}},
		},
		// Sample stack 1 is record stack 2, 2 is 1.
		SampleStacks: []int{2, 1},
		Files: []record.File{{ID: 0, Path: "/m/w.bin", PagesMissed: 10, IOWaitNS: 2e9,
			Stacks: []record.StackCharge{{Stack: 2, PID: 7, NS: 1.1e9}, {Stack: 1, PID: 7, NS: 0.9e9}}}},
		Samples: []record.Sample{
			{EndNS: 1e9, Files: []record.FileDelta{{File: 0, PagesMissed: 5, IOWaitNS: 0.9e9,
				Stacks: []record.SampleStack{{N: 2, NS: 0.8e9}, {N: 1, NS: 0.1e9}}}},
				Threads: []record.ThreadDelta{{TID: 7, PID: 7, IOWaitNS: 0.9e9}}},
			{EndNS: 2e9, Files: []record.FileDelta{{File: 0, PagesMissed: 5, IOWaitNS: 1e9,
				Stacks: []record.SampleStack{{N: 1, NS: 1e9}}}},
				Threads: []record.ThreadDelta{{TID: 7, PID: 7, IOWaitNS: 1e9}}}},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 2e9}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, r, attribution.Analyze(r)); err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			TS   float64        `json:"ts"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tr.TraceEvents {
		if strings.HasPrefix(e.Name, "I/O wait") {
			got = append(got, fmt.Sprint(e.Args["stack"]))
		}
	}
	if want := []string{"main.py:12 head", "main.py:30 rest"}; !slices.Equal(got, want) {
		t.Errorf("I/O-wait slices name %q, want %q", got, want)
	}
}

// TestCompileWindowsCarryTheirOwnStack: two calls of one process into a
// compile entry point, timed by a uprobe from two lines, give two compile
// slices, each naming its own line, not the line the process was started
// from; a window without a stack falls back to its process's.
func TestCompileWindowsCarryTheirOwnStack(t *testing.T) {
	r := &record.Record{
		WallNS: 3e9, IntervalNS: 1e9,
		Stacks: []record.PyStack{
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 3, Func: "<module>"}}},
			{Frames: []record.PyFrame{{File: "/src/model.py", Line: 41, Func: "compile_attention"}}},
			{Frames: []record.PyFrame{{File: "/src/model.py", Line: 77, Func: "compile_mlp"}}},
		},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 3e9, Stack: 1}},
		JIT: &record.JIT{Windows: []record.JITWindow{
			{PID: 7, StartNS: 1e8, EndNS: 6e8, Kind: "uprobe", Source: "libnvrtc.so:nvrtcCompileProgram", Stack: 2},
			{PID: 7, StartNS: 1e9, EndNS: 1.5e9, Kind: "uprobe", Source: "libnvrtc.so:nvrtcCompileProgram", Stack: 3},
			{PID: 7, StartNS: 2e9, EndNS: 2.5e9, Kind: "uprobe", Source: "libnvrtc.so:nvrtcCompileProgram"},
		}},
	}
	var got []string
	for _, e := range parseTimeline(t, writeTimeline(t, r, attribution.Analyze(r))) {
		if e.Args["source"] == "libnvrtc.so:nvrtcCompileProgram" && e.Ph == "X" {
			got = append(got, fmt.Sprint(e.Args["stack"]))
		}
	}
	want := []string{"model.py:41 compile_attention", "model.py:77 compile_mlp", "main.py:3 <module>"}
	if !slices.Equal(got, want) {
		t.Errorf("compile slices' stacks %q, want %q", got, want)
	}
}
