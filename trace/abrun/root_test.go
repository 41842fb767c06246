package abrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/trace/launch"
)

// TestMain lets the test binary act as coldtrace's gated shim.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == launch.ShimArg {
		launch.RunShim()
	}
	os.Exit(m.Run())
}

func newRunner(t *testing.T) *Runner {
	t.Helper()
	a, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Version: "test", Actor: a, NoGPU: true})
}

func TestRunCapturesAndTimes(t *testing.T) {
	testenv.RequireTracing(t)
	r := newRunner(t)
	// System time: dd copies 1 GiB of zeros in the kernel; stdout is fixed.
	res, err := r.Run(context.Background(), []string{"sh", "-c",
		`dd if=/dev/zero of=/dev/null bs=1M count=1024 2>/dev/null; echo hello; echo "oops $COLDTRACE_BENCH_TEST" >&2; exit 3`},
		[]string{"COLDTRACE_BENCH_TEST=1"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("hello\n"))
	if res.StdoutSHA256 != hex.EncodeToString(sum[:]) || string(res.Stderr) != "oops 1\n" {
		t.Errorf("stdout %q (%s) stderr %q", res.Stdout, res.StdoutSHA256, res.Stderr)
	}
	if res.ExitCode != 3 || res.WallNS <= 0 || res.SysNS <= 0 || res.UserNS+res.SysNS <= 0 {
		t.Errorf("exit %d wall %d user %d sys %d", res.ExitCode, res.WallNS, res.UserNS, res.SysNS)
	}
	if !res.Matches(regexp.MustCompile("^oops")) || res.Matches(regexp.MustCompile("absent")) {
		t.Error("--expect matching")
	}
	if res.Split.Total() != res.WallNS {
		t.Errorf("split %v sums to %d, wall %d", res.Split, res.Split.Total(), res.WallNS)
	}
}

// A process that allocates 64 MiB and holds it: the tree's peak RSS
// must see it.
func TestPeakRSS(t *testing.T) {
	testenv.RequireTracing(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	res, err := newRunner(t).Run(context.Background(),
		[]string{"sh", "-c", `python3 -c 'import time; b = bytearray(64 << 20); time.sleep(0.5)'`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakRSSBytes < 64<<20 {
		t.Errorf("peak RSS %d, want at least 64 MiB", res.PeakRSSBytes)
	}
}

// A CPU hog outside the traced tree during runs 3 and 4 only: those runs
// are flagged and name it; the hog is absent from the others.
func TestHogOutsideTreeFlagged(t *testing.T) {
	testenv.RequireTracing(t)
	r := newRunner(t)
	var hog *exec.Cmd
	stopHog := func() {
		if hog != nil {
			_ = hog.Process.Signal(syscall.SIGKILL)
			_ = hog.Wait()
		}
	}
	defer stopHog()
	hogPID := 0
	progress := func(i, n int, side abtest.Side, warmup bool, eta time.Duration) {
		switch i {
		case 3:
			hog = exec.Command("sh", "-c", "while :; do :; done")
			if err := hog.Start(); err != nil {
				t.Error(err)
			}
			hogPID = hog.Process.Pid
			time.Sleep(200 * time.Millisecond)
		case 5:
			stopHog()
			hog = nil
		}
	}
	p := abtest.Plan{A: abtest.Command{Argv: []string{"sleep", "1.2"}}, B: abtest.Command{Argv: []string{"sleep", "1.2"}}, Pairs: 2, BusyCPU: 0.25}
	rep, err := Bench(context.Background(), r, p, progress, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 5 {
		t.Fatalf("%d runs", len(rep.Runs))
	}
	for i, rr := range rep.Runs {
		named := false
		for _, b := range rr.Interference.Top {
			if b.PID == hogPID {
				named = true
				if b.CPUs < 0.3 {
					t.Errorf("run %d: the hog used %.2f CPUs, want most of one", i+1, b.CPUs)
				}
			}
		}
		hogRun := i == 2 || i == 3
		t.Logf("run %d: others %.2f CPUs (peak %.2f), %d samples, top %+v", i+1, rr.Interference.CPUMean, rr.Interference.CPUPeak, rr.Interference.Samples, rr.Interference.Top)
		if hogRun && (!rr.Interfered || !named) {
			t.Errorf("run %d ran beside the hog: interfered %v, named %v", i+1, rr.Interfered, named)
		}
		if !hogRun && named {
			t.Errorf("run %d names the hog, which was not running", i+1)
		}
	}
	for _, pr := range rep.Summary.Pairs {
		if (pr.B == 2 || pr.B == 3) && !pr.Interfered {
			t.Errorf("pair of B run %d not marked", pr.B+1)
		}
	}
}

func TestStopsOnFailureAndExpect(t *testing.T) {
	testenv.RequireTracing(t)
	r := newRunner(t)
	p := abtest.Plan{A: abtest.Command{Argv: []string{"true"}}, B: abtest.Command{Argv: []string{"false"}}, Pairs: 2, BusyCPU: 1e9}
	rep, err := Bench(context.Background(), r, p, nil, nil)
	if !errors.Is(err, ErrStopped) || len(rep.Runs) != 2 {
		t.Fatalf("err %v after %d runs, want a stop at run 2", err, len(rep.Runs))
	}
	p.KeepGoing = true
	rep, err = Bench(context.Background(), r, p, nil, nil)
	if err != nil || len(rep.Runs) != 5 || rep.Runs[1].Status != abtest.Failed || rep.Summary.Verdict.Kind != abtest.TooFew {
		t.Fatalf("keep-going: err %v, %d runs, %+v", err, len(rep.Runs), rep.Summary.Verdict)
	}
	p = abtest.Plan{A: abtest.Command{Argv: []string{"echo", "mmproj off"}}, B: abtest.Command{Argv: []string{"echo", "mmproj on"}}, Pairs: 1,
		BusyCPU: 1e9, Expect: regexp.MustCompile("off")}
	rep, err = Bench(context.Background(), r, p, nil, nil)
	if !errors.Is(err, ErrStopped) || len(rep.Runs) != 2 || !rep.Runs[1].ExpectMiss {
		t.Fatalf("expect: err %v after %d runs", err, len(rep.Runs))
	}
	p.Expect, p.SameOutput = nil, true
	if _, err = Bench(context.Background(), r, p, nil, nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("same-output: err %v", err)
	}
}
