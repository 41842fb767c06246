package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
)

// phases is what testdata/workloads/groundtruth.c measures of itself.
type phases struct {
	SleepNS   int64 `json:"sleep_ns"`
	ReadNS    int64 `json:"read_ns"`
	SpinNS    int64 `json:"spin_ns"`
	CompileNS int64 `json:"compile_ns"`
	// OverlapNS is how long the parallel mode's read and spin ran
	// together.
	OverlapNS int64 `json:"overlap_ns"`
	TotalNS   int64 `json:"total_ns"`
}

func runGroundTruth(t *testing.T, mode ...string) (phases, summaryJSON) {
	t.Helper()
	bin := buildC(t, "groundtruth", "-lpthread")
	file := e2eutil.EvictableFile(t, 512<<20)
	out := filepath.Join(t.TempDir(), "s.json")
	// A fine interval keeps the read phase (0.2 s on a fast disk) from
	// being absorbed into its neighbours by the phase smoothing.
	args := append([]string{"-q", "--interval", "20ms", "--json", out, "--", bin, file, "1000", "1000"}, mode...)
	code, stdout, stderr := coldtrace(t, nil, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var ph phases
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &ph); err != nil {
		t.Fatalf("workload output %q: %v", stdout, err)
	}
	s := readSummary(t, out)
	var sum int64
	for _, r := range s.Breakdown {
		sum += r.NS
	}
	if len(s.Breakdown) != 6 {
		t.Errorf("breakdown has %d rows, want 6", len(s.Breakdown))
	}
	if math.Abs(float64(sum-s.WallNS)) > 0.01*float64(s.WallNS) {
		t.Errorf("breakdown sums to %v, wall is %v", time.Duration(sum), time.Duration(s.WallNS))
	}
	t.Logf("workload: sleep %v, read %v, spin %v, compile %v", time.Duration(ph.SleepNS), time.Duration(ph.ReadNS),
		time.Duration(ph.SpinNS), time.Duration(ph.CompileNS))
	for _, r := range s.Breakdown {
		t.Logf("  %-12s %v", r.Category, time.Duration(r.NS))
	}
	t.Logf("verdict: %s", s.Verdict)
	// What else took the CPUs: a phase's time that no signal covers (a
	// preempted compiler, a vCPU the host ran elsewhere) is other_wait.
	if m := s.Machine; m != nil {
		t.Logf("others' CPU %v (%d processes), steal %v", time.Duration(m.OthersCPUNS), m.OthersCount, time.Duration(m.StealNS))
	}
	for _, p := range s.Processes {
		t.Logf("  process %d %-10s cpu %v, off-CPU %v, I/O wait %v", p.PID, p.Comm, time.Duration(p.CPUNS), time.Duration(p.OffCPUNS), time.Duration(p.IOWaitNS))
	}
	for _, p := range s.Phases {
		t.Logf("  phase %v-%v %s", time.Duration(p.StartNS), time.Duration(p.EndNS), p.Dominant)
	}
	// Time the hypervisor gives other guests (steal) is time the guest's
	// clock counts and its CPU clock does not: a spinning thread's stolen
	// time is a wait to coldtrace, and rightly so, but the workload's
	// clock calls it spin. Steal is the VM's, over its two vCPUs: past a
	// fifth of the spin, the spin's vCPU alone may have lost its 10%
	// tolerance, and the run says nothing about the rules (seen on a
	// contended host: 1.54 s of steal in a 4.3 s run, cpu 747 ms for a
	// 1 s spin; a quiet one steals some 15 ms a second).
	if m := s.Machine; m != nil && m.StealNS > ph.SpinNS/5 {
		t.Skipf("the hypervisor took %v of the VM's CPUs during the run (steal), more than the phases' tolerance: CPU cannot be told from waiting", time.Duration(m.StealNS))
	}
	return ph, s
}

func within(t *testing.T, what string, got, want int64, tol float64) {
	t.Helper()
	if math.Abs(float64(got-want)) > tol*float64(want) {
		t.Errorf("%s: %v, want %v ± %.0f%%", what, time.Duration(got), time.Duration(want), tol*100)
	}
}

// kernelSource writes a C file that takes the compiler a while: the
// compile phase of the ground truth.
func kernelSource(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < 250; i++ {
		fmt.Fprintf(&b, "double k%d(double *x, int n) { double s = 0; for (int i = 0; i < n; i++) s += x[i] * %d.5 / (x[(i*%d)%%n] + 1); return s; }\n", i, i, i+7)
	}
	path := filepath.Join(t.TempDir(), "kernels.c")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGroundTruthSequential: sleep, cold read, spin and a compiler run,
// each timed by the workload itself, must come out as other_wait,
// disk_read, cpu and jit_compile.
func TestGroundTruthSequential(t *testing.T) {
	requireTracing(t)
	src := kernelSource(t)
	// The compiler's own files cold (DAMON pages idle ones out within
	// minutes) are a disk read inside the compile phase, which the rule
	// rightly gives to disk_read: the workload's clock cannot tell (seen:
	// disk_read 885 ms for an 804 ms read, cc1 cold too). One compile
	// beforehand brings them in.
	if out, err := exec.Command("cc", "-O2", "-c", src, "-o", "/dev/null").CombinedOutput(); err != nil {
		t.Fatalf("warm the compiler: %v\n%s", err, out)
	}
	ph, s := runGroundTruth(t, "sequential", src)
	// The read phase is the data file's fills. The rest of disk_read,
	// other files the run read from disk (the workload's and the
	// compiler's, some paged out under load: seen, 9 files, 27 ms) and
	// disk time in no file's row (seen in a quiet run: 65 ms taken from
	// the compile phase; its source, likely the compiler's temporary
	// files beside writeback, not pinned down yet), is disk time the
	// workload's clock counts in its other phases, mostly the compile.
	var data int64
	for _, f := range s.Files {
		if filepath.Base(f.Path) == "data.bin" {
			data += f.IOWaitNS + f.MissCPUNS + f.FillWaitNS
		}
	}
	// The file's counters and the per-poll breakdown differ by a few ms
	// (seen: up to 19 ms either way): the rest is never below 0.
	rest := max(s.category("disk_read")-data, 0)
	t.Logf("data.bin's disk reads %v; disk_read %v", time.Duration(data), time.Duration(s.category("disk_read")))
	within(t, "data.bin's disk reads vs the read phase", data, ph.ReadNS, 0.10)
	within(t, "cpu vs the spin phase", s.category("cpu"), ph.SpinNS, 0.10)
	// Other waits get ±20%. A wait behind a switch the scheduler probe
	// never saw is split by the kernel's run-queue clock, so a spinning
	// or compiling thread's preemptions stay run-queue waits (booked as
	// "other" before: 1.106 and 1.111 s for a 1.000 s sleep in quiet
	// runs), yet beside one busy loop other wait still comes out
	// 1.003-1.109 s (15 runs): an excess taken from the other phases,
	// not pinned down (docs/limitations.md).
	within(t, "other_wait vs the sleep phase", s.category("other_wait"), ph.SleepNS, 0.20)
	within(t, "jit_compile and the rest of disk_read vs the compile phase", s.category("jit_compile")+rest, ph.CompileNS, 0.10)
	if len(s.Phases) < 4 {
		t.Errorf("phases %+v: want idle, load, cpu and compile phases", s.Phases)
	}
	if !strings.Contains(s.Verdict, "data.bin") {
		t.Errorf("verdict does not name the file read cold: %q", s.Verdict)
	}
}

// TestGroundTruthParallel: one thread reads a cold file while another
// spins. The documented rule gives the overlap to disk_read, so disk_read
// is the read phase and cpu is the spin less the overlap. The overlap is
// the workload's own: on a slow disk the read outlasts the spin, and cpu
// is then near zero, so its error is taken against the spin's length.
func TestGroundTruthParallel(t *testing.T) {
	requireTracing(t)
	ph, s := runGroundTruth(t, "parallel")
	within(t, "disk_read vs the read phase", s.category("disk_read"), ph.ReadNS, 0.10)
	if ph.OverlapNS <= 0 || ph.OverlapNS > min(ph.ReadNS, ph.SpinNS) {
		t.Fatalf("workload overlap %v: not within its phases", time.Duration(ph.OverlapNS))
	}
	if got, want := s.category("cpu"), ph.SpinNS-ph.OverlapNS; math.Abs(float64(got-want)) > 0.10*float64(ph.SpinNS) {
		t.Errorf("cpu vs spin %v minus overlap %v: %v, want %v ± 10%% of the spin", time.Duration(ph.SpinNS),
			time.Duration(ph.OverlapNS), time.Duration(got), time.Duration(want))
	}
	within(t, "other_wait vs the sleep phase", s.category("other_wait"), ph.SleepNS, 0.10)
}
