package gpu

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// TestLostGPUEndsItsSeries: a GPU that answers GPU_IS_LOST is asked
// nothing more; its samples stop at the poll before, the device says when
// and why, and the other GPU goes on.
func TestLostGPUEndsItsSeries(t *testing.T) {
	srv := dgxh100.NewWithGPUs(gpus.H100_SXM5_80GB, gpus.H100_SXM5_80GB)
	quiet(srv)
	c := newClock()
	d0 := mockDev(srv, 0)
	lost := func() bool { return c.idx() >= 2 }
	d0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		if lost() {
			return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
		}
		return nvml.Utilization{Gpu: 90}, nvml.SUCCESS
	}
	d0.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if lost() {
			return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
		}
		return nvml.Memory{Total: 80 * gib, Used: 2 * gib}, nvml.SUCCESS
	}
	s := Open(srv, Options{Now: c.Now, Comm: noComm(t)})
	defer s.Close()
	g := run(s, c, 5)

	d := g.Devices[0]
	if d.LostNS == nil || *d.LostNS != int64(2*step) || d.LostReason != "GPU is lost" {
		t.Fatalf("GPU 0 = %+v, want lost at %v", d, 2*step)
	}
	if g.Devices[1].LostNS != nil {
		t.Errorf("GPU 1 lost too: %+v", g.Devices[1])
	}
	if n := len(g.DeviceSamples(0)); n != 2 {
		t.Errorf("GPU 0 has %d samples, want the 2 before the loss", n)
	}
	if n := len(g.DeviceSamples(1)); n != 5 {
		t.Errorf("GPU 1 has %d samples, want 5", n)
	}
	if n := len(d0.GetUtilizationRatesCalls()); n != 3 {
		t.Errorf("a lost GPU was asked %d times, want 3 (2 answers and the loss)", n)
	}
	if len(g.Warnings) != 0 {
		t.Errorf("the loss is not a warning per poll: %q", g.Warnings)
	}
	if sums := g.Summaries(); sums[0].LostNS == nil || sums[0].BusyNS != int64(step) {
		t.Errorf("GPU 0 summary %+v, want lost and busy one interval", sums[0])
	}
}

// TestDeniedProcessListWarnsOnce: a refused process list (no
// permission) is one warning, not one per list.
func TestDeniedProcessListWarnsOnce(t *testing.T) {
	srv := dgxh100.NewWithGPUs(gpus.H100_SXM5_80GB)
	quiet(srv)
	c := newClock()
	d0 := mockDev(srv, 0)
	d0.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	d0.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	s := Open(srv, Options{Now: c.Now, Comm: noComm(t)})
	defer s.Close()
	g := run(s, c, 3)
	if len(g.Warnings) != 1 || !strings.HasPrefix(g.Warnings[0], "GPU 0: compute processes: no permission (3 times)") {
		t.Errorf("warnings %q", g.Warnings)
	}
	if n := len(d0.GetGraphicsRunningProcessesCalls()); n != 0 {
		t.Errorf("graphics list asked %d times after the compute list was refused", n)
	}
}
