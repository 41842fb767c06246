package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/schematest"
)

type benchDoc struct {
	Schema string `json:"schema"`
	Bench  struct {
		Runs []struct {
			N          int              `json:"n"`
			Side       string           `json:"side"`
			Status     string           `json:"status"`
			WallNS     int64            `json:"wall_ns"`
			Categories map[string]int64 `json:"categories"`
			Cold       *struct {
				EvictedBytes int64 `json:"evicted_bytes"`
			} `json:"cold"`
		} `json:"runs"`
		Summary struct {
			MedianNS   int64   `json:"median_diff_ns"`
			MaxNS      int64   `json:"max_diff_ns"`
			DriftPct   float64 `json:"drift_pct"`
			Pairs      []any   `json:"pairs"`
			Categories []struct {
				Category string `json:"category"`
				MedianNS int64  `json:"median_ns"`
			} `json:"categories"`
			Verdict struct {
				Kind         string `json:"kind"`
				Straddles    bool   `json:"range_includes_zero"`
				WithinDrift  bool   `json:"within_drift"`
				WithinSpread bool   `json:"within_a_spread"`
				Why          []struct {
					Category string `json:"category"`
					MedianNS int64  `json:"median_ns"`
				} `json:"why"`
			} `json:"verdict"`
		} `json:"summary"`
		OutputsDiffer bool `json:"outputs_differ"`
	} `json:"bench"`
	Verdict string `json:"verdict_text"`
}

func readBench(t *testing.T, path string) benchDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d benchDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	schematest.Validate(t, docBench.Name, b)
	return d
}

// checkDiskFaster: every counted A read from disk and no counted B did
// as much (the attribution's per-run disk_read, which a cached read of
// the same file does not have), disk reads the category B gained most
// in, and the verdict says so with disk reads first. How much faster the
// Bs were in wall time is the machine's business: under load the As drift
// (cold reads 70 ms to 300 ms on this shared 2-CPU VM) and other
// processes' CPU makes a range straddle zero. Then the verdict must say
// why it could not tell (drift, or busy neighbours), and only that is
// checked.
func checkDiskFaster(t *testing.T, d benchDoc, stderr string) {
	t.Helper()
	var aDisk, bDisk []int64
	for _, r := range d.Bench.Runs {
		if r.Status != "counted" {
			continue
		}
		if r.Side == "A" {
			aDisk = append(aDisk, r.Categories["disk_read"])
		} else {
			bDisk = append(bDisk, r.Categories["disk_read"])
		}
	}
	if len(aDisk) == 0 || len(bDisk) == 0 {
		t.Fatalf("counted runs: %d As, %d Bs\n%s", len(aDisk), len(bDisk), stderr)
	}
	if slices.Min(aDisk) <= 0 {
		t.Errorf("an A read nothing from disk: disk_read %v\n%s", aDisk, stderr)
	}
	if slices.Max(bDisk) >= slices.Min(aDisk) {
		t.Errorf("a B's disk_read %v reaches an A's %v\n%s", bDisk, aDisk, stderr)
	}
	s := d.Bench.Summary
	best, bestNS := "", int64(0)
	for _, c := range s.Categories {
		if c.MedianNS < bestNS {
			best, bestNS = c.Category, c.MedianNS
		}
	}
	if best != "disk_read" {
		t.Errorf("the category B gained most in is %q, want disk_read\n%s", best, stderr)
	}
	v := s.Verdict
	// A shuffled order can leave fewer independent pairs than the sign
	// test needs (too_few_runs), and a loaded machine a drift or busy
	// neighbours the difference does not clear: the verdict then says it
	// cannot tell, which is right.
	if v.Kind == "too_few_runs" || strings.HasPrefix(v.Kind, "no_difference") && (v.WithinDrift || strings.Contains(d.Verdict, "other processes were busy")) {
		t.Logf("the machine could not tell (drift %+.0f%%): verdict %q", s.DriftPct, d.Verdict)
		return
	}
	if v.Kind != "b_faster" || len(v.Why) == 0 || v.Why[0].Category != "disk_read" || v.Why[0].MedianNS >= 0 {
		t.Errorf("verdict %+v (%s), want B faster for less disk_read\n%s", v, d.Verdict, stderr)
	}
	if !strings.Contains(stderr, "less disk reads") {
		t.Errorf("the terminal verdict does not name disk reads:\n%s", stderr)
	}
}

// A reads a file evicted before each run, B a cached one. dd writes to
// /dev/null: with cat, copying 128 MiB into the captured stdout would
// weigh as much as the read.
func TestBenchEvictedAgainstCached(t *testing.T) {
	requireTracing(t)
	a, b := e2eutil.EvictableFile(t, 128<<20), e2eutil.EvictableFile(t, 128<<20)
	e2eutil.WarmUp(t, b)
	dir := t.TempDir()
	jsonPath, plot := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.svg")
	code, _, stderr := coldtrace(t, nil, "bench", "-n", "6", "--a", "dd if="+a+" of=/dev/null bs=1M", "--b", "dd if="+b+" of=/dev/null bs=1M",
		"--prepare-a", "dd if="+a+" iflag=nocache count=0 status=none",
		"--prepare-b", "dd if="+b+" of=/dev/null bs=1M status=none",
		"--json", jsonPath, "--plot", plot)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	d := readBench(t, jsonPath)
	if len(d.Bench.Runs) != 13 || len(d.Bench.Summary.Pairs) == 0 {
		t.Fatalf("%d runs, %d pairs:\n%s", len(d.Bench.Runs), len(d.Bench.Summary.Pairs), stderr)
	}
	checkDiskFaster(t, d, stderr)
	if svg, err := os.ReadFile(plot); err != nil || strings.Count(string(svg), `<g class="run"`) != 13 {
		t.Errorf("plot: %v, %d bars", err, strings.Count(string(svg), `<g class="run"`))
	}
}

// --cold-warm: coldtrace evicts what the previous runs read before each A.
func TestBenchColdWarm(t *testing.T) {
	requireTracing(t)
	f := e2eutil.EvictableFile(t, 128<<20)
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	code, _, stderr := coldtrace(t, nil, "bench", "-n", "6", "--same-output", "--json", jsonPath, "--cold-warm", "--", "dd", "if="+f, "of=/dev/null", "bs=1M")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	d := readBench(t, jsonPath)
	if len(d.Bench.Runs) != 14 { // one warm-up finds the files
		t.Fatalf("%d runs, want 14", len(d.Bench.Runs))
	}
	for _, r := range d.Bench.Runs {
		var sum int64
		for _, v := range r.Categories {
			sum += v
		}
		if len(r.Categories) != 6 || sum != r.WallNS {
			t.Errorf("run %d: categories %v sum to %d, wall %d", r.N, r.Categories, sum, r.WallNS)
		}
		if (r.Side == "A") != (r.Cold != nil) {
			t.Errorf("run %d (%s): cold %v", r.N, r.Side, r.Cold)
		}
		if r.Side == "A" && r.Cold.EvictedBytes < 120<<20 {
			t.Errorf("run %d evicted %d bytes, want the 128 MiB file", r.N, r.Cold.EvictedBytes)
		}
	}
	checkDiskFaster(t, d, stderr)
}

// The same command on both sides: no difference beyond drift, or too
// few pairs to tell when slow-mode runs left fewer than abtest.MinPairs
// (seen in CI: four pairs, all one way by chance); never a verdict. In a
// shuffled order: on the CI VM the alternating one had the Bs 1–3%
// faster in three runs out of three (README, bench). Ten runs a side: at
// six, a CI run had four Bs between three As (three independent pairs),
// every B below every A by chance, and a verdict.
func TestBenchAAgainstA(t *testing.T) {
	requireTracing(t)
	mdPath := filepath.Join(t.TempDir(), "bench.md")
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	code, _, stderr := coldtrace(t, nil, "bench", "-n", "10", "--order", "shuffle", "--seed", "7", "--same-output", "--expect", "(?m)^same$",
		"--a", "sh -c 'sleep 0.05; echo same'", "--b", "sh -c 'sleep 0.05; echo same'",
		"--json", jsonPath, "--markdown", mdPath)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	d := readBench(t, jsonPath)
	words := map[string]string{"no_difference_beyond_drift": "no difference beyond drift", "too_few_runs": "too few pairs to tell"}
	kind := string(d.Bench.Summary.Verdict.Kind)
	if words[kind] == "" || d.Bench.OutputsDiffer {
		t.Errorf("verdict %q, outputs differ %v:\n%s", d.Verdict, d.Bench.OutputsDiffer, stderr)
	}
	md, err := os.ReadFile(mdPath)
	if err != nil || words[kind] != "" && !strings.Contains(string(md), words[kind]) {
		t.Errorf("markdown: %v\n%s", err, md)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "--a", "true"},
		{"bench", "--a", "true", "--b", "'open"},
		{"bench", "--cold-warm"},
		{"bench", "--cold-warm", "--a", "x", "--", "true"},
		{"bench", "-n", "0", "--a", "true", "--b", "true"},
		{"bench", "--order", "random", "--a", "true", "--b", "true"},
		{"bench", "--expect", "(", "--a", "true", "--b", "true"},
	} {
		if code, _, stderr := coldtrace(t, nil, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, exitUsage, stderr)
		}
	}
}

// SIGINT ends the bench: the run going on gets it, no further run starts,
// and what was measured is still reported.
func TestBenchInterrupted(t *testing.T) {
	requireTracing(t)
	cmd := exec.Command(ctBin, "bench", "-n", "5", "--a", "sleep 0.6", "--b", "sleep 0.6")
	cmd.Env = os.Environ()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("%v, want exit 1:\n%s", err, errb.String())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the bench took %v to stop", d)
	}
	out := errb.String()
	if !strings.Contains(out, "stopped: interrupted") || strings.Contains(out, "\n11  ") {
		t.Errorf("stderr:\n%s", out)
	}
}
