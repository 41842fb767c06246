package gpu

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The scripted libnvidia-ml.so.1 (testdata/gpu/fakenvml.c) through the
// real go-nvml binding: dlopen, versioned symbols, cgo. Each case runs in
// a child test process, since a library bound into a process stays there.
const fakeChildEnv = "COLDTRACE_FAKE_NVML_LIB"

func buildFake(t *testing.T) string {
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
	lib := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	b, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden",
		"-DNVML_NO_UNVERSIONED_FUNC_DEFS", "-I"+filepath.Join(strings.TrimSpace(string(out)), "pkg", "nvml"),
		"-o", lib, "../../testdata/gpu/fakenvml.c").CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %v: %s", err, b)
	}
	return lib
}

// runFakeChild runs TestFakeNVMLChild with the library and scenario text.
func runFakeChild(t *testing.T, lib, scenario string) (string, error) {
	t.Helper()
	scn := filepath.Join(t.TempDir(), "s.scn")
	if err := os.WriteFile(scn, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFakeNVMLChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fakeChildEnv+"="+lib, "FAKE_NVML_SCENARIO="+scn)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestFakeNVMLChild is the child: it opens the library, names itself
// ctgpu-child (the scenario's process), samples three times and prints
// what it got.
func TestFakeNVMLChild(t *testing.T) {
	lib := os.Getenv(fakeChildEnv)
	if lib == "" {
		t.Skip("run by TestFakeNVMLThroughGoNVML and TestFakeNVMLRejectsBadScenarios")
	}
	if err := os.WriteFile("/proc/self/comm", []byte("ctgpu-child"), 0o644); err != nil {
		t.Fatal(err)
	}
	me := int32(os.Getpid())
	s := Open(nvml.New(nvml.WithLibraryPath(lib)), Options{Traced: func(pid int32) bool { return pid == me }})
	if !s.Available() {
		fmt.Printf("UNAVAILABLE: %s\n", s.Unavailable())
		return
	}
	c := newClock()
	s.opts.Now = c.Now
	g := run(s, c, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range g.Devices {
		fmt.Printf("DEVICE %d %q %s total=%d unsupported=%s\n", d.Index, d.Name, d.UUID, d.MemTotal, strings.Join(d.Unsupported, ","))
	}
	for _, smp := range g.Samples {
		fmt.Printf("SAMPLE dev=%d util=%d used=%d clock=%d power=%d\n", smp.Device, smp.UtilGPUPct, smp.MemUsedBytes, smp.SMClockMHz, smp.PowerMW)
	}
	for _, p := range g.Processes {
		sm := "-"
		if p.SMUtilPct != nil {
			sm = fmt.Sprint(*p.SMUtilPct)
		}
		fmt.Printf("PROC dev=%d self=%v mem=%d sm=%s\n", p.Device, p.PID == me, deref(p.MemUsedBytes), sm)
	}
	fmt.Printf("WARNINGS %q\n", g.Warnings)
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func TestFakeNVMLThroughGoNVML(t *testing.T) {
	lib := buildFake(t)
	out, err := runFakeChild(t, lib, `# two devices; the child's process on the second
device 0 total=1000 base=100 uuid=GPU-a name=Fake A
device 1 total=8589934592 base=1073741824 clock=1400 power=70000 unsupported=power uuid=GPU-b name=Fake B 16GB
step at 0
proc 1 ctgpu-child mem=2147483648 sm=60 memutil=5
`)
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{
		`DEVICE 0 "Fake A" GPU-a total=1000 unsupported=` + "\n",
		`DEVICE 1 "Fake B 16GB" GPU-b total=8589934592 unsupported=power_mw` + "\n",
		"SAMPLE dev=0 util=0 used=100 clock=1755 power=250000\n",
		"SAMPLE dev=1 util=60 used=3221225472 clock=1400 power=0\n",
		"PROC dev=1 self=true mem=2147483648 sm=60\n",
		"WARNINGS []\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "PROC dev=1 self=true mem=2147483648"); n != 3 {
		t.Errorf("%d process entries, want one per poll (3):\n%s", n, out)
	}
	if strings.Contains(out, "PROC dev=0") {
		t.Errorf("the process shows on GPU 0:\n%s", out)
	}
}

func TestFakeNVMLRejectsBadScenarios(t *testing.T) {
	lib := buildFake(t)
	long := "device 0 total=1 name=" + strings.Repeat("x", 600) + "\n"
	for _, c := range []struct{ name, text, line string }{
		{"unknown directive", "init ok\nfrobnicate 1\n", "line 2: unknown directive"},
		{"devices out of order", "device 1 total=1 name=A\n", "line 1: devices are numbered"},
		{"proc before any step", "device 0 total=1 name=A\nproc 0 x mem=1\n", "line 2: proc and lost belong to a step"},
		{"percent over 100", "device 0 total=1 name=A\nstep at 0\nproc 0 x sm=101\n", "line 3: bad proc field"},
		{"command name too long", "device 0 total=1 name=A\nstep at 0\nproc 0 abcdefghijklmnop mem=1\n", "line 3: proc needs a command name"},
		{"no such device", "device 0 total=1 name=A\nstep at 0\nlost 3\n", "line 3: no such device"},
		{"line too long", long, "line 1: line too long"},
		{"bad number", "device 0 total=12abc name=A\n", "line 1: bad device field"},
		{"unknown query", "device 0 total=1 unsupported=util,warp name=A\n", "line 1: bad device field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runFakeChild(t, lib, c.text)
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !strings.Contains(out, c.line) || !strings.Contains(out, "UNAVAILABLE: no NVIDIA GPU (NVML init: ") {
				t.Errorf("want %q and an init failure:\n%s", c.line, out)
			}
		})
	}
	out, err := runFakeChild(t, lib, "init version_mismatch\n")
	if err != nil || !strings.Contains(out, "UNAVAILABLE: no NVIDIA GPU (NVML library and driver versions differ)") {
		t.Errorf("version mismatch: %v\n%s", err, out)
	}
}
