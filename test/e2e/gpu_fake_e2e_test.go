package e2e

// End-to-end tests of the GPU half on machines without a GPU: coldtrace
// loads the scripted libnvidia-ml.so.1
// (testdata/gpu/fakenvml.c) the way it loads the real one, through
// LD_LIBRARY_PATH, and traces testdata/gpu/workload.py, which marks its
// rounds and steps the scenario's phases.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
)

// fakeNVMLDir builds the library into a directory of t's (as make
// fake-nvml does into bin/fake-nvml): a fraction of a second with gcc.
func fakeNVMLDir(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is needed to build the scripted libnvidia-ml.so.1")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is needed to find go-nvml's nvml.h")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
	if err != nil {
		t.Fatalf("find go-nvml's nvml.h: %v", err)
	}
	dir := t.TempDir()
	inc := filepath.Join(strings.TrimSpace(string(out)), "pkg", "nvml")
	b, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden",
		"-DNVML_NO_UNVERSIONED_FUNC_DEFS", "-I"+inc, "-o", filepath.Join(dir, "libnvidia-ml.so.1"),
		"../../testdata/gpu/fakenvml.c").CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %v: %s", err, b)
	}
	return dir
}

// gpuRun is one traced run of the workload under a scenario.
type gpuRun struct {
	code           int
	stderr         string
	summary        map[string]any
	segs           []gpuSegment
	rec            *record.Record
	recPath, phase string
}

type gpuSegment struct {
	Index      int              `json:"index"`
	Label      string           `json:"label"`
	StartNS    int64            `json:"start_ns"`
	EndNS      int64            `json:"end_ns"`
	GPUs       []segmentGPUJSON `json:"gpus"`
	VRAMAtExit []map[string]any `json:"vram_at_exit"`
	Breakdown  []map[string]any `json:"breakdown"`
}

type segmentGPUJSON struct {
	GPU            int    `json:"gpu"`
	BusyNS         int64  `json:"busy_ns"`
	VRAMStartBytes uint64 `json:"vram_start_bytes"`
	VRAMPeakBytes  uint64 `json:"vram_peak_bytes"`
	VRAMEndBytes   uint64 `json:"vram_end_bytes"`
	AllocatedBytes uint64 `json:"allocated_bytes"`
	AllocatedBy    string `json:"allocated_by"`
	LostNS         *int64 `json:"lost_ns"`
	Polls          int    `json:"polls"`
}

func (s gpuSegment) gpuCompute() float64 {
	for _, r := range s.Breakdown {
		if r["category"] == "gpu_compute" {
			ns, _ := r["ns"].(float64)
			return ns
		}
	}
	return 0
}

// runGPUScenario traces workload.py COMM STEPS under the scenario.
func runGPUScenario(t *testing.T, scenario string, polls int, steps ...string) gpuRun {
	t.Helper()
	testenv.RequireTracing(t)
	lib := fakeNVMLDir(t)
	dir := t.TempDir()
	r := gpuRun{recPath: filepath.Join(dir, "rec"), phase: filepath.Join(dir, "phase")}
	sum := filepath.Join(dir, "sum.json")
	scn, err := filepath.Abs(filepath.Join("../../testdata/gpu/scenarios", scenario))
	if err != nil {
		t.Fatal(err)
	}
	work, _ := filepath.Abs("../../testdata/gpu/workload.py")
	args := append([]string{"run", "--gpu-interval", "50ms", "-o", r.recPath, "--json", sum, "--",
		"/usr/bin/python3", work, "ctgpu-work"}, steps...)
	res := runCT(t, ctOptions{env: []string{"LD_LIBRARY_PATH=" + lib, "FAKE_NVML_SCENARIO=" + scn,
		"FAKE_NVML_PHASE=" + r.phase, fmt.Sprintf("FAKE_NVML_POLLS=%d", polls)}}, args...)
	r.code, r.stderr = res.code, res.stderr
	b, err := os.ReadFile(sum)
	if err != nil {
		t.Fatalf("no JSON summary (exit %d): %v; stderr:\n%s", r.code, err, r.stderr)
	}
	var segs struct {
		Segments []gpuSegment `json:"segments"`
	}
	if err := json.Unmarshal(b, &r.summary); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &segs); err != nil {
		t.Fatal(err)
	}
	r.segs = segs.Segments
	if r.rec, err = record.ReadFile(r.recPath); err != nil {
		t.Fatal(err)
	}
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	return r
}

// seg finds a segment by label.
func (r gpuRun) seg(t *testing.T, label string) gpuSegment {
	t.Helper()
	for _, s := range r.segs {
		if s.Label == label {
			return s
		}
	}
	t.Fatalf("no segment %q in %+v", label, r.segs)
	return gpuSegment{}
}

// Seed 001's numbers, in the scenario's bytes.
const (
	seedBase    = 1288490189  // 1.2 GiB before the run
	seedPeak    = 23407571763 // 21.8 GiB
	seedKept    = 19649260749 // 18.3 GiB
	seedRunPeak = 22119081574 // 20.6 GiB the workload allocated
)

func TestFakeGPUSeedRoundsVRAMPerSegment(t *testing.T) {
	steps := []string{"mark:round 1", "phase:r1-load-a", "phase:r1-load-b", "phase:r1-sample"}
	for i := 2; i <= 10; i++ {
		steps = append(steps, fmt.Sprintf("mark:round %d", i), fmt.Sprintf("phase:r%d-sample", i))
	}
	r := runGPUScenario(t, "seed001.scn", 2, steps...)
	checkSeedSegments(t, r)
	checkSeedText(t, r.recPath)
	checkSeedTimeline(t, r.recPath)
	checkSeedDiff(t, r.recPath)
}

// checkSeedSegments: exact VRAM per round in the JSON segments[], busy
// time within each round, the VRAM released at exit.
func checkSeedSegments(t *testing.T, r gpuRun) {
	t.Helper()

	r1 := r.seg(t, "round 1")
	if len(r1.GPUs) != 1 {
		t.Fatalf("round 1 GPUs = %+v", r1.GPUs)
	}
	g := r1.GPUs[0]
	if g.VRAMStartBytes != seedBase || g.VRAMPeakBytes != seedPeak || g.VRAMEndBytes != seedKept ||
		g.AllocatedBytes != seedRunPeak || g.AllocatedBy != "processes" {
		t.Errorf("round 1 GPU = %+v, want start %d peak %d end %d allocated %d by processes", g, seedBase, seedPeak, seedKept, seedRunPeak)
	}
	if g.BusyNS <= 0 || g.BusyNS > r1.EndNS-r1.StartNS {
		t.Errorf("round 1 busy %d ns, want in (0, %d]", g.BusyNS, r1.EndNS-r1.StartNS)
	}
	checkGPUCompute(t, r1)
	for i := 2; i <= 10; i++ {
		s := r.seg(t, fmt.Sprintf("round %d", i))
		g := s.GPUs[0]
		end := g.VRAMEndBytes
		if i == 10 && end == seedBase {
			// The last segment ends at the exit: a poll between the
			// command's exit and the moment coldtrace saw it shows the
			// VRAM released.
			end = seedKept
		}
		if g.VRAMStartBytes != seedKept || g.VRAMPeakBytes != seedKept || end != seedKept || g.AllocatedBytes != 0 {
			t.Errorf("%s GPU = %+v, want 18.3 GiB throughout and nothing allocated", s.Label, g)
		}
		if g.BusyNS <= 0 || g.BusyNS > s.EndNS-s.StartNS {
			t.Errorf("%s busy %d ns, want in (0, %d]", s.Label, g.BusyNS, s.EndNS-s.StartNS)
		}
		checkGPUCompute(t, s)
	}
	last := r.segs[len(r.segs)-1]
	if len(last.VRAMAtExit) != 1 || last.VRAMAtExit[0]["released"] != true ||
		last.VRAMAtExit[0]["before_bytes"] != float64(seedKept) || last.VRAMAtExit[0]["after_bytes"] != float64(seedBase) {
		t.Errorf("vram_at_exit = %v, want released 18.3 → 1.2 GiB", last.VRAMAtExit)
	}
	// The summary's GPU section says it too, as does a run without marks.
	if !strings.Contains(r.stderr, "\nGPUs\n") || !strings.Contains(r.stderr, "  GPU 0: the run's VRAM was released at exit (18.3 GiB → 1.2 GiB)") {
		t.Errorf("the summary does not say the VRAM was released:\n%s", r.stderr)
	}

}

// checkGPUCompute: the segment's gpu_compute row is the GPU's busy time
// weighted by its utilization (98% in the scenario), so it is above 0 and
// at most the busy time the segment's GPU numbers say (1 ms for rounding).
func checkGPUCompute(t *testing.T, s gpuSegment) {
	t.Helper()
	if c := s.gpuCompute(); c <= 0 || c > float64(s.GPUs[0].BusyNS+1e6) {
		t.Errorf("%s gpu_compute %v ns, busy %d ns", s.Label, c, s.GPUs[0].BusyNS)
	}
}

// checkSeedText: the segment table says it in words.
func checkSeedText(t *testing.T, rec string) {
	t.Helper()
	code, out, stderr := coldtrace(t, nil, "report", "--segments", rec)
	if code != 0 {
		t.Fatalf("report --segments: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"GPU 0: round 1 allocated 20.6 GiB of VRAM (peak 21.8 GiB) and kept 18.3 GiB; rounds 2–10 allocated none\n",
		"GPU 0: the run's VRAM was released at exit (18.3 GiB → 1.2 GiB)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report --segments lacks %q:\n%s", want, out)
		}
	}
	noRawEscape(t, "report --segments", out)

}

// checkSeedTimeline: the timeline's segment slices carry the same numbers.
func checkSeedTimeline(t *testing.T, rec string) {
	t.Helper()
	code, out, stderr := coldtrace(t, nil, "report", "--timeline", "-", rec)
	if code != 0 {
		t.Fatalf("report --timeline -: exit %d: %s", code, stderr)
	}
	var tl struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal([]byte(out), &tl); err != nil {
		t.Fatalf("timeline: %v", err)
	}
	found := 0
	for _, e := range tl.TraceEvents {
		if e.Cat != "segment" || e.Name != "round 1" && e.Name != "round 2" {
			continue
		}
		found++
		want := float64(seedRunPeak)
		if e.Name == "round 2" {
			want = 0
		}
		if e.Args["gpu0_allocated_bytes"] != want || e.Args["gpu0_vram_start_bytes"] == nil {
			t.Errorf("timeline %s args = %v", e.Name, e.Args)
		}
	}
	if found != 2 {
		t.Errorf("timeline has %d of the two segment slices", found)
	}

}

// checkSeedDiff: diff --segments says round 1 loads and round 2 reuses.
func checkSeedDiff(t *testing.T, rec string) {
	t.Helper()
	code, out, stderr := coldtrace(t, nil, "diff", "--segments", "round 1,round 2", rec)
	if code != 0 {
		t.Fatalf("diff --segments: exit %d: %s", code, stderr)
	}
	want := "GPU 0 VRAM: A allocated 20.6 GiB (1.2 GiB → 18.3 GiB), B allocated none (18.3 GiB → 18.3 GiB)"
	if !strings.Contains(out, want) {
		t.Errorf("diff --segments lacks %q:\n%s", want, out)
	}
	code, out, _ = coldtrace(t, nil, "diff", "--json", "--segments", "1,2", rec)
	var d struct {
		GPUs []struct {
			AAllocated uint64 `json:"a_allocated_bytes"`
			BAllocated uint64 `json:"b_allocated_bytes"`
			AStart     uint64 `json:"a_vram_start_bytes"`
			BEnd       uint64 `json:"b_vram_end_bytes"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || len(d.GPUs) != 1 {
		t.Fatalf("diff --json --segments: exit %d, %v: %s", code, err, out)
	}
	if g := d.GPUs[0]; g.AAllocated != seedRunPeak || g.BAllocated != 0 || g.AStart != seedBase || g.BEnd != seedKept {
		t.Errorf("diff JSON GPU = %+v", g)
	}
}

func TestFakeGPUSharedWithUntracedProcess(t *testing.T) {
	other := exec.Command("/usr/bin/python3", "-c",
		`import sys,time; open("/proc/self/comm","w").write("ctgpu-other"); sys.stdout.write("ok\n"); sys.stdout.flush(); time.sleep(600)`)
	outPipe, err := other.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	buf := make([]byte, 3)
	if _, err := outPipe.Read(buf); err != nil {
		t.Fatal(err)
	}
	r := runGPUScenario(t, "shared.scn", 2, "mark:round 1", "phase:work")
	if r.rec.GPU == nil || len(r.rec.GPU.Interference) != 1 {
		t.Fatalf("interference = %+v", r.rec.GPU)
	}
	x := r.rec.GPU.Interference[0]
	if x.PID != int32(other.Process.Pid) || x.Name != "ctgpu-other" || x.MemPeakBytes != 2147483648 {
		t.Errorf("interference = %+v, want pid %d ctgpu-other with 2 GiB", x, other.Process.Pid)
	}
	if !strings.Contains(r.stderr, "GPU 0 was also used by 1 untraced process(es) (ctgpu-other)") {
		t.Errorf("no interference note:\n%s", r.stderr)
	}
	g := r.seg(t, "round 1").GPUs[0]
	// The segment's VRAM is everyone's; what the run allocated is its own.
	if g.VRAMPeakBytes != 536870912+2147483648+4294967296 || g.AllocatedBytes != 4294967296 {
		t.Errorf("round 1 GPU = %+v, want peak 6.5 GiB and 4 GiB allocated by the run", g)
	}
}

func TestFakeGPULostMidRun(t *testing.T) {
	r := runGPUScenario(t, "lost.scn", 2, "mark:round 1", "phase:load", "phase:sample",
		"mark:round 2", "once:lost", "sleep:0.3")
	if len(r.rec.GPU.Devices) != 1 || r.rec.GPU.Devices[0].LostNS == nil {
		t.Fatalf("devices = %+v, want GPU 0 lost", r.rec.GPU.Devices)
	}
	d := r.rec.GPU.Devices[0]
	if d.LostReason != "GPU is lost" {
		t.Errorf("lost reason %q", d.LostReason)
	}
	for _, s := range r.rec.GPU.Samples {
		if s.TNS >= *d.LostNS {
			t.Errorf("sample at %d after the loss at %d", s.TNS, *d.LostNS)
		}
	}
	r2 := r.seg(t, "round 2")
	if *d.LostNS < r2.StartNS || *d.LostNS >= r2.EndNS || r2.GPUs[0].LostNS == nil {
		t.Errorf("loss at %d not in round 2 [%d, %d): %+v", *d.LostNS, r2.StartNS, r2.EndNS, r2.GPUs[0])
	}
	// One clear line, and the rest of the trace: the CPU and the
	// processes were still recorded after the loss.
	if n := strings.Count(r.stderr, "note: GPU 0 was lost at +"); n != 1 {
		t.Errorf("%d lost notes, want 1:\n%s", n, r.stderr)
	}
	if !strings.Contains(r.stderr, "GPU 0 lost at +") || !strings.Contains(r.stderr, "(GPU is lost): its numbers stop there") {
		t.Errorf("lost note lacks the reason:\n%s", r.stderr)
	}
	if len(r.rec.Samples) == 0 || r.rec.Samples[len(r.rec.Samples)-1].EndNS <= *d.LostNS || len(r.rec.GPU.Warnings) != 0 {
		t.Errorf("the trace stopped with the GPU or warned per poll: warnings %q", r.rec.GPU.Warnings)
	}
}

func TestFakeGPUProcessQueriesNotSupported(t *testing.T) {
	// Round 2 keeps round 1's end away from the exit.
	r := runGPUScenario(t, "noprocs.scn", 2, "mark:round 1", "phase:load", "phase:sample", "mark:round 2", "phase:after")
	want := "note: GPU 0 does not report its processes (per-process VRAM), per-process utilization (NVML: not supported)"
	if n := strings.Count(r.stderr, want); n != 1 {
		t.Errorf("%d notes %q, want 1:\n%s", n, want, r.stderr)
	}
	if un := r.rec.GPU.Devices[0].Unsupported; strings.Join(un, ",") != "processes,process_util" {
		t.Errorf("unsupported = %q", un)
	}
	// Without per-process memory, what the segment allocated is the
	// device's growth.
	g := r.seg(t, "round 1").GPUs[0]
	if g.AllocatedBy != "device" || g.AllocatedBytes != 4294967296 || g.VRAMEndBytes != 419430400+3221225472 {
		t.Errorf("round 1 GPU = %+v", g)
	}
	if len(r.rec.GPU.Warnings) != 0 {
		t.Errorf("not supported is not a warning per poll: %q", r.rec.GPU.Warnings)
	}
}

func TestFakeGPUMIGWithoutUtilization(t *testing.T) {
	r := runGPUScenario(t, "mig.scn", 2, "mark:round 1", "phase:load", "phase:sample", "mark:round 2", "phase:after")
	want := "note: GPU 0 does not report utilization, memory utilization, per-process utilization (NVML: not supported)"
	if n := strings.Count(r.stderr, want); n != 1 {
		t.Errorf("%d notes %q, want 1:\n%s", n, want, r.stderr)
	}
	g := r.seg(t, "round 1").GPUs[0]
	if g.AllocatedBytes != 10737418240 || g.AllocatedBy != "processes" || g.VRAMEndBytes != 536870912+10737418240 || g.BusyNS != 0 {
		t.Errorf("round 1 GPU = %+v, want 10 GiB allocated and no busy time (no utilization)", g)
	}
	if len(r.rec.GPU.Warnings) != 0 {
		t.Errorf("warnings %q", r.rec.GPU.Warnings)
	}
}

func TestFakeGPUProcessQueriesDenied(t *testing.T) {
	r := runGPUScenario(t, "denied.scn", 2, "mark:round 1", "phase:sample")
	if len(r.rec.GPU.Warnings) != 1 || !strings.HasPrefix(r.rec.GPU.Warnings[0], "GPU 0: compute processes: no permission") {
		t.Errorf("warnings = %q, want one for the refused process list", r.rec.GPU.Warnings)
	}
	if g := r.seg(t, "round 1").GPUs[0]; g.VRAMPeakBytes != 1288490189+4294967296 || g.BusyNS <= 0 {
		t.Errorf("device numbers lost with the process list: %+v", g)
	}
}

func TestFakeGPUWorkOnSecondDevice(t *testing.T) {
	r := runGPUScenario(t, "twogpus.scn", 4, "mark:round 1", "phase:load", "phase:sample")
	s := r.seg(t, "round 1")
	if len(s.GPUs) != 2 {
		t.Fatalf("GPUs = %+v", s.GPUs)
	}
	g0, g1 := s.GPUs[0], s.GPUs[1]
	if g0.AllocatedBytes != 0 || g0.BusyNS != 0 || g0.VRAMPeakBytes != 536870912 {
		t.Errorf("GPU 0 = %+v, want idle", g0)
	}
	if g1.GPU != 1 || g1.AllocatedBytes != 17179869184 || g1.BusyNS <= 0 || g1.VRAMPeakBytes != 536870912+17179869184 {
		t.Errorf("GPU 1 = %+v, want 16 GiB allocated and busy", g1)
	}
	code, out, _ := coldtrace(t, nil, "report", "--segments", r.recPath)
	if code != 0 || !strings.Contains(out, "GPU 1: round 1 allocated 16.0 GiB of VRAM") || strings.Contains(out, "GPU 0: round 1 allocated") {
		t.Errorf("report --segments:\n%s", out)
	}
}

func TestFakeGPUInitFailuresSayWhich(t *testing.T) {
	for scn, want := range map[string]string{
		"nodriver.scn": "no NVIDIA GPU (NVIDIA driver not loaded)",
		"mismatch.scn": "no NVIDIA GPU (NVML library and driver versions differ)",
	} {
		t.Run(scn, func(t *testing.T) {
			r := runGPUScenario(t, scn, 0, "mark:round 1", "sleep:0.2")
			if r.rec.GPU == nil || r.rec.GPU.Unavailable != want {
				t.Errorf("gpu = %+v, want unavailable %q", r.rec.GPU, want)
			}
			if n := strings.Count(r.stderr, want); n != 1 {
				t.Errorf("stderr says %q %d times, want once:\n%s", want, n, r.stderr)
			}
			if len(r.segs) == 0 || len(r.segs[len(r.segs)-1].GPUs) != 0 || len(r.rec.Samples) == 0 {
				t.Errorf("the run did not go on without GPU numbers: %+v", r.segs)
			}
		})
	}
}

// TestFakeGPUNotLoadedFromTheUsersFiles: under sudo, coldtrace asks the
// loader for libnvidia-ml.so.1 by name and nothing else; a copy of the
// scripted library in the user's home, ~/lib or ~/.local/lib is not
// loaded (sudo itself drops LD_LIBRARY_PATH before coldtrace starts).
func TestFakeGPUNotLoadedFromTheUsersFiles(t *testing.T) {
	testenv.RequireTracing(t)
	lib := fakeNVMLDir(t)
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"); err == nil {
		t.Skip("a real libnvidia-ml.so.1 is installed: the loader finds it")
	}
	u := testuser.Create(t)
	home := userDir(t, u)
	b, err := os.ReadFile(filepath.Join(lib, "libnvidia-ml.so.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{home, filepath.Join(home, "lib"), filepath.Join(home, ".local", "lib")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "libnvidia-ml.so.1"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	scn, _ := filepath.Abs("../../testdata/gpu/scenarios/seed001.scn")
	sum := filepath.Join(home, "sum.json")
	env := append(sudoEnv(u), "FAKE_NVML_SCENARIO="+scn)
	res := runCT(t, ctOptions{env: env}, "run", "-q", "--json", sum, "--", "true")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var s struct {
		GPUs []any `json:"gpus"`
	}
	data, err := os.ReadFile(sum)
	if err != nil || json.Unmarshal(data, &s) != nil {
		t.Fatalf("summary: %v: %s", err, data)
	}
	if len(s.GPUs) != 0 {
		t.Errorf("a library from the user's files was loaded: %s", data)
	}
	rec := filepath.Join(home, "rec")
	res = runCT(t, ctOptions{env: env}, "run", "-q", "-o", rec, "--", "true")
	r, err := record.ReadFile(rec)
	if res.code != 0 || err != nil {
		t.Fatalf("exit %d, %v", res.code, err)
	}
	if r.GPU == nil || r.GPU.Unavailable != "no NVIDIA GPU (libnvidia-ml.so.1 not found)" {
		t.Errorf("gpu = %+v, want libnvidia-ml.so.1 not found", r.GPU)
	}
}
