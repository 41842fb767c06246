package gpu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/coldtrace/coldtrace/record"
)

// TestRealGPU samples the machine's real GPUs for about 3 s (longer if the
// workload runs longer, at most 2 min) while a workload runs, and prints
// the samples. The workload is $COLDTRACE_GPU_WORKLOAD (a sh command; by
// default nvidia-smi in a loop); it and its descendants are the traced
// processes. $COLDTRACE_GPU_JSON, when set, receives the record. It skips
// on a machine without an NVIDIA GPU. testdata/gpu/check.sh runs it.
func TestRealGPU(t *testing.T) {
	s := Open(nvml.New(), Options{})
	if !s.Available() {
		msg := s.Unavailable()
		s.Close()
		t.Skipf("%s: nothing to sample", msg)
	}
	s.Close()

	workload := os.Getenv("COLDTRACE_GPU_WORKLOAD")
	if workload == "" {
		workload = "for i in 1 2 3 4 5 6; do nvidia-smi >/dev/null; sleep 0.3; done"
	}
	cmd := exec.Command("sh", "-c", workload)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	var root atomic.Int32
	s = Open(nvml.New(), Options{
		Traced: func(pid int32) bool { r := root.Load(); return r != 0 && descends(pid, r) },
	})
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.Start(ctx)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	root.Store(int32(cmd.Process.Pid))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		werr = <-done
	}
	if d := time.Since(start); d < 3*time.Second {
		time.Sleep(3*time.Second - d)
	}
	s.Stop()
	g := s.Result(start)
	t.Logf("workload %q: %v after %v", workload, werr, time.Since(start).Round(time.Millisecond))

	if len(g.Devices) == 0 || len(g.Samples) == 0 {
		t.Fatalf("no devices or samples: %+v", g)
	}
	printRecord(t, g)
	if path := os.Getenv("COLDTRACE_GPU_JSON"); path != "" {
		b, err := json.MarshalIndent(struct {
			GPU          *record.GPU              `json:"gpu"`
			GPUs         []record.GPUSummary      `json:"gpus"`
			Interference []record.GPUInterference `json:"gpu_interference"`
		}{g, g.Summaries(), g.Interference}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, smp := range g.Samples {
		if !smp.Has(record.GPUFieldMemUsed) {
			t.Errorf("sample without memory used: %+v", smp)
		}
	}
}

func printRecord(t *testing.T, g *record.GPU) {
	for _, d := range g.Devices {
		t.Logf("GPU %d: %s %s, %d MiB, unsupported %v", d.Index, d.Name, d.UUID, d.MemTotal>>20, d.Unsupported)
	}
	t.Logf("%8s %3s %5s %5s %10s %6s %8s", "t_ms", "dev", "util", "mem%", "used_MiB", "SM_MHz", "power_W")
	for _, s := range g.Samples {
		field := func(has bool, v string) string {
			if !has {
				return "-"
			}
			return v
		}
		t.Logf("%8d %3d %5s %5s %10s %6s %8s", s.TNS/1e6, s.Device,
			field(s.Has(record.GPUFieldUtil), strconv.Itoa(int(s.UtilGPUPct))),
			field(s.Has(record.GPUFieldMemUtil), strconv.Itoa(int(s.UtilMemPct))),
			field(s.Has(record.GPUFieldMemUsed), strconv.FormatUint(s.MemUsedBytes>>20, 10)),
			field(s.Has(record.GPUFieldSMClock), strconv.Itoa(int(s.SMClockMHz))),
			field(s.Has(record.GPUFieldPower), fmt.Sprintf("%.1f", float64(s.PowerMW)/1000)))
	}
	for _, p := range g.Processes {
		t.Logf("traced pid %d on GPU %d at %d ms: mem %s, sm %s, mem util %s", p.PID, p.Device, p.TNS/1e6,
			optU64(p.MemUsedBytes, 20), optU32(p.SMUtilPct), optU32(p.MemUtilPct))
	}
	for _, x := range g.Interference {
		t.Logf("interference: %+v", x)
	}
	for _, w := range g.Warnings {
		t.Logf("warning: %s", w)
	}
	for _, sum := range g.Summaries() {
		b, _ := json.Marshal(sum)
		t.Logf("summary: %s", b)
	}
}

func optU64(v *uint64, shift uint) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatUint(*v>>shift, 10) + " MiB"
}

func optU32(v *uint32) string {
	if v == nil {
		return "-"
	}
	return strconv.Itoa(int(*v)) + "%"
}

// descends says whether pid is root or one of its descendants, by walking
// the parent links in /proc.
func descends(pid, root int32) bool {
	for range 64 {
		if pid == root {
			return true
		}
		if pid <= 1 {
			return false
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			return false
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			return false
		}
		pid = int32(ppid)
	}
	return false
}
