package attribution

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

var update = flag.Bool("update", false, "rewrite the golden results in testdata/golden")

// TestGolden compares the whole JSON result of each recorded fixture with
// its golden file; `go test ./attribution -update` rewrites them.
func TestGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "records", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		t.Run(name, func(t *testing.T) {
			r, err := record.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			res := Analyze(r)
			checkInvariants(t, res)
			got, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("result differs from %s (run with -update after checking the change):\n%s", golden, got)
			}
		})
	}
}

// TestJSONShape pins the keys the summary and `--json` rely on.
func TestJSONShape(t *testing.T) {
	res := Analyze(loadFixture(t, "reader-spinner"))
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		WallNS    int64 `json:"wall_ns"`
		Breakdown []map[string]any
		Phases    []map[string]any
		Verdict   struct {
			Kind string `json:"kind"`
		}
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.WallNS != 1000*ms || m.Verdict.Kind == "" || len(m.Breakdown) != 6 || len(m.Phases) == 0 {
		t.Fatalf("json = %s", b)
	}
	var names []string
	for _, row := range m.Breakdown {
		names = append(names, row["category"].(string))
		if _, ok := row["ns"].(float64); !ok {
			t.Errorf("row without ns: %v", row)
		}
	}
	if want := []string{"disk_read", "jit_compile", "gpu_compute", "download", "cpu", "other_wait"}; !slices.Equal(names, want) {
		t.Errorf("categories = %v", names)
	}
	for _, k := range []string{"start_ns", "end_ns", "dominant"} {
		if _, ok := m.Phases[0][k]; !ok {
			t.Errorf("phase has no %q: %v", k, m.Phases[0])
		}
	}
	if bytes.Contains(b, []byte(`"Slices"`)) || bytes.Contains(b, []byte(`"slices"`)) {
		t.Error("per-slice data leaked into JSON")
	}
	empty, _ := json.Marshal(Analyze(nil))
	if !bytes.Contains(empty, []byte(`"phases":[]`)) {
		t.Errorf("empty run phases not []: %s", empty)
	}
}

// TestDeterministic: the result does not depend on the order samples,
// processes or downloads are stored in, and repeats exactly.
func TestDeterministic(t *testing.T) {
	for _, tc := range analyzeCases {
		r := tc.record(t)
		if r == nil {
			continue
		}
		a, _ := json.Marshal(Analyze(r))
		b, _ := json.Marshal(Analyze(r))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two runs differ", tc.name)
		}
		// Reversing samples changes nothing when their end times are
		// distinct.
		ends := map[int64]bool{}
		distinct := true
		for _, s := range r.Samples {
			distinct = distinct && !ends[s.EndNS]
			ends[s.EndNS] = true
		}
		if !distinct {
			continue
		}
		rev := *r
		rev.Samples = slices.Clone(r.Samples)
		slices.Reverse(rev.Samples)
		rev.Processes = slices.Clone(r.Processes)
		slices.Reverse(rev.Processes)
		c, _ := json.Marshal(Analyze(&rev))
		if !bytes.Equal(a, c) {
			t.Errorf("%s: result depends on sample order", tc.name)
		}
	}
}

// TestRandomRecords: on arbitrary records (overlapping threads, windows,
// GPU, downloads, jittery and missing samples) the rows always sum to the
// wall and the phases tile it.
func TestRandomRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		r := randomRecord(rng)
		res := Analyze(r)
		t.Run("", func(t *testing.T) {
			checkInvariants(t, res)
			if res.WarmEstimateNS < 0 || res.WarmEstimateNS > res.WallNS {
				t.Errorf("record %d: warm estimate %d outside [0, %d]", n, res.WarmEstimateNS, res.WallNS)
			}
		})
	}
}

func randomRecord(rng *rand.Rand) *record.Record {
	wall := rng.Int64N(5000) * ms
	r := &record.Record{WallNS: wall, IntervalNS: 100 * ms}
	for pid := int32(1); pid <= 4; pid++ {
		comms := []string{"python3", "ptxas", "sh", "cc1plus"}
		r.Processes = append(r.Processes, record.Process{PID: pid, PPID: pid - 1, Comm: comms[rng.IntN(len(comms))]})
	}
	for i := range 3 {
		r.Files = append(r.Files, record.File{ID: i, Path: "f" + string(rune('a'+i)), PagesMissed: uint64(rng.IntN(3))})
	}
	t := int64(0)
	for t < wall+300*ms {
		t += (rng.Int64N(250) + 1) * ms
		if rng.IntN(10) == 0 {
			continue // a lost poll
		}
		s := record.Sample{EndNS: t}
		for tid := int32(1); tid <= int32(rng.IntN(5)); tid++ {
			s.Threads = append(s.Threads, record.ThreadDelta{TID: tid, PID: 1 + tid%4,
				CPUNS: rng.Int64N(150) * ms, IOWaitNS: rng.Int64N(100) * ms, MissCPUNS: rng.Int64N(60) * ms,
				RunQueueNS: rng.Int64N(20) * ms, OtherWaitNS: rng.Int64N(100) * ms})
		}
		for f := range rng.IntN(4) {
			s.Files = append(s.Files, record.FileDelta{File: f, IOWaitNS: rng.Int64N(100) * ms, MissCPUNS: rng.Int64N(30) * ms})
		}
		r.Samples = append(r.Samples, s)
	}
	r.JIT = &record.JIT{}
	for range rng.IntN(4) {
		st := rng.Int64N(wall+1) - 100*ms
		r.JIT.Windows = append(r.JIT.Windows, record.JITWindow{PID: 1 + rng.Int32N(4), StartNS: st,
			EndNS: st + rng.Int64N(2000)*ms, Kind: "in_process", Source: "triton"})
	}
	if rng.IntN(2) == 0 {
		r.GPU = &record.GPU{}
		for tns := int64(0); tns < wall+200*ms; tns += (rng.Int64N(300) + 50) * ms {
			r.GPU.Samples = append(r.GPU.Samples, record.GPUSample{TNS: tns, Device: rng.IntN(2), UtilGPUPct: uint32(rng.IntN(120))})
		}
	}
	for range rng.IntN(3) {
		st := rng.Int64N(wall + 1)
		r.Downloads = append(r.Downloads, record.Download{Path: "d", StartNS: st, EndNS: st + rng.Int64N(1000)*ms})
	}
	return r
}

func TestPhasesAbsorb(t *testing.T) {
	mk := func(startMS, endMS int64, s split) Slice {
		return Slice{StartNS: startMS * ms, EndNS: endMS * ms, Split: Split(s.ns())}
	}
	// cpu 0–1000, a 100 ms slice mostly disk but with 40 ms of jit, then
	// jit 1100–2000: the flicker joins the neighbour whose dominant
	// category holds more of it (jit).
	got := phases([]Slice{
		mk(0, 1000, split{cpu: 1000}),
		mk(1000, 1100, split{disk: 60, jit: 40}),
		mk(1100, 2000, split{jit: 900}),
	}, 200*ms)
	if len(got) != 2 || got[0].EndNS != 1000*ms || got[1].Dominant != JITCompile || got[1].Split[0].NS != 60*ms {
		t.Errorf("phases = %+v", got)
	}
	// Two short runs between equal neighbours: merged away, one phase.
	got = phases([]Slice{
		mk(0, 500, split{cpu: 500}),
		mk(500, 600, split{disk: 100}),
		mk(600, 700, split{gpu: 100}),
		mk(700, 1200, split{cpu: 500}),
	}, 200*ms)
	if len(got) != 1 || got[0].Dominant != CPU || got[0].Name != "cpu" {
		t.Errorf("phases = %+v", got)
	}
	// Nothing shorter than the minimum: untouched.
	got = phases([]Slice{mk(0, 300, split{other: 300}), mk(300, 600, split{dl: 300})}, 200*ms)
	if len(got) != 2 || got[0].Name != "idle" || got[1].Name != "download" {
		t.Errorf("phases = %+v", got)
	}
}

func TestLargestRemainder(t *testing.T) {
	for _, c := range []struct {
		w     []float64
		total int64
		want  []int64
	}{
		{[]float64{1, 1, 1}, 100, []int64{34, 33, 33}},
		{[]float64{0.5, 0, 0.5}, 3, []int64{2, 0, 1}},
		{[]float64{2, 1}, 0, []int64{0, 0}},
		{nil, 5, []int64{}},
	} {
		if got := Apportion(c.w, c.total); !slices.Equal(got, c.want) {
			t.Errorf("Apportion(%v, %d) = %v, want %v", c.w, c.total, got, c.want)
		}
	}
}

func TestCompilerNames(t *testing.T) {
	m := registry.NewCompilerNames([]string{"my-jit"})
	for name, want := range map[string]bool{
		"ptxas": true, "cc1plus": true, "gcc-13": true, "clang++-18": true,
		"x86_64-linux-gnu-g++": true, "x86_64-linux-gnu-gcc-13": true, "my-jit": true,
		"python3": false, "clang-format": false, "bash": false, "": false, "ccache-x": false,
	} {
		if got := m.Match(name); got != want {
			t.Errorf("match(%q) = %v", name, got)
		}
	}
	// A process found by its executable when its comm is truncated, and a
	// descendant of a compiler.
	r := &record.Record{Processes: []record.Process{
		{PID: 1, Comm: "python3"},
		{PID: 2, PPID: 1, Comm: "x86_64-linux-gn", Exe: "/usr/bin/x86_64-linux-gnu-gcc-13"},
		{PID: 3, PPID: 2, Comm: "sh"},
	}}
	got := findCompilers(r, nil)
	if len(got) != 2 || got[2] != "x86_64-linux-gn" || got[3] != "sh" {
		t.Errorf("compilers = %v", got)
	}
	// pip asks rustc its version on every install: that compiles nothing.
	r.Processes = append(r.Processes, record.Process{PID: 4, PPID: 1, Comm: "rustc", Args: []string{"rustc", "--version"}},
		record.Process{PID: 5, PPID: 1, Comm: "rustc", Args: []string{"rustc", "--crate-type=lib", "lib.rs"}})
	if got := findCompilers(r, nil); got[4] != "" || got[5] != "rustc" {
		t.Errorf("compilers = %v: rustc --version is none, rustc lib.rs is one", got)
	}
}

// BenchmarkHourRun is an hour at 100 ms with 40 threads, 20 files, 1,000
// JIT windows and a GPU: the size of the runs the tool is for.
func BenchmarkHourRun(b *testing.B) {
	r := &record.Record{WallNS: 3600e9, IntervalNS: 100 * ms, JIT: &record.JIT{}, GPU: &record.GPU{}}
	for i := range 20 {
		r.Files = append(r.Files, record.File{ID: i, Path: "f"})
	}
	for t := int64(100 * ms); t <= r.WallNS; t += 100 * ms {
		s := record.Sample{EndNS: t}
		for tid := int32(1); tid <= 40; tid++ {
			s.Threads = append(s.Threads, record.ThreadDelta{TID: tid, PID: tid % 4, CPUNS: 30 * ms, IOWaitNS: 10 * ms, MissCPUNS: 5 * ms, OtherWaitNS: 60 * ms})
		}
		for f := range 5 {
			s.Files = append(s.Files, record.FileDelta{File: (int(t/ms) + f) % 20, IOWaitNS: 10 * ms})
		}
		r.Samples = append(r.Samples, s)
		r.GPU.Samples = append(r.GPU.Samples, record.GPUSample{TNS: t, UtilGPUPct: uint32(t / ms % 100)})
	}
	for i := range int64(1000) {
		r.JIT.Windows = append(r.JIT.Windows, record.JITWindow{PID: 1, StartNS: i * 3 * 1e9, EndNS: i*3*1e9 + 2e9, Kind: "in_process", Source: "triton"})
	}
	b.ResetTimer()
	for b.Loop() {
		Analyze(r)
	}
}

// TestFateOfABodyKeptInACache: a destination deleted by the end whose
// body the client also kept in a cache (pip's HTTP cache) is kept, as
// that cache keeps it; without the copy it is fetched again.
func TestFateOfABodyKeptInACache(t *testing.T) {
	kept := &record.DownloadFile{Path: "/h/.cache/pip/http/a/b/c/d/e/k", BytesWritten: 8 << 20}
	d := record.Download{Path: "/tmp/u/p.whl", Destination: record.DestFile, Bytes: 8 << 20,
		Files: []record.DownloadFile{{Path: "/tmp/u/p.whl", Gone: true}, *kept}}
	r := &record.Record{JIT: &record.JIT{Caches: []record.Cache{{Name: "pip", Root: "/h/.cache/pip", FS: "ext4"}}}}
	if f, _ := FateOf(r, d); f != FateDeleted {
		t.Errorf("without its copy: %s, want %s", f, FateDeleted)
	}
	d.KeptIn, d.Cache = kept, "pip"
	if f, c := FateOf(r, d); f != FateKept || c == nil || c.Name != "pip" {
		t.Errorf("kept in pip's cache: %s %+v, want %s", f, c, FateKept)
	}
	r.JIT.Caches[0].FS = "tmpfs"
	if f, _ := FateOf(r, d); f != FateVolatile {
		t.Errorf("kept in pip's cache on tmpfs: %s, want %s", f, FateVolatile)
	}
	gone := *kept
	gone.Gone = true
	d.KeptIn = &gone
	if f, _ := FateOf(r, d); f != FateDeleted {
		t.Errorf("its copy gone too: %s, want %s", f, FateDeleted)
	}
}

// TestFateOfAnUnpackedArchive: every file of an unpacked archive is its
// body: one of them gone, and a rerun fetches it again.
func TestFateOfAnUnpackedArchive(t *testing.T) {
	d := record.Download{Path: "/h/.cache/torch/hub/model", Destination: record.DestUnpacked, Cache: "torch_hub",
		Files: []record.DownloadFile{{Path: "/h/.cache/torch/hub/model/w.bin"}, {Path: "/h/.cache/torch/hub/model/cfg.json"}}}
	r := &record.Record{JIT: &record.JIT{Caches: []record.Cache{{Name: "torch_hub", Root: "/h/.cache/torch/hub", FS: "ext4"}}}}
	if f, _ := FateOf(r, d); f != FateKept {
		t.Errorf("kept: %s", f)
	}
	d.Files[1].Gone = true
	if f, _ := FateOf(r, d); f != FateDeleted {
		t.Errorf("a file gone: %s, want %s", f, FateDeleted)
	}
}
