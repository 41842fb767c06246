package abrun

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/record"
)

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string][]string{
		`cat /tmp/x`:                  {"cat", "/tmp/x"},
		`  python3 -c 'print("a b")'`: {"python3", "-c", `print("a b")`},
		`echo "a \"b\" \$HOME" c\ d`:  {"echo", `a "b" $HOME`, "c d"},
		`sh -c 'a|b' > f`:             {"sh", "-c", "a|b", ">", "f"},
		`''`:                          {""},
		``:                            nil,
	} {
		got, err := SplitArgs(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`echo 'open`, `echo "open`, `trailing\`} {
		if _, err := SplitArgs(bad); err == nil {
			t.Errorf("SplitArgs(%q): no error", bad)
		}
	}
	if got := ArgsFromFile("python3\n-c\nprint('a b')\n"); !reflect.DeepEqual(got, []string{"python3", "-c", "print('a b')"}) {
		t.Errorf("ArgsFromFile: %q", got)
	}
}

func TestOrder(t *testing.T) {
	p := abtest.Plan{Pairs: 3}
	if got := p.Order(); !reflect.DeepEqual(got, []abtest.Side{"A", "B", "A", "B", "A", "B", "A"}) {
		t.Errorf("alternate: %v", got)
	}
	p.Shuffle = true
	for seed := uint64(1); seed < 20; seed++ {
		p.Seed = seed
		got := p.Order()
		nA := 0
		for _, s := range got {
			if s == abtest.A {
				nA++
			}
		}
		if len(got) != 7 || nA != 4 || got[0] != abtest.A || got[6] != abtest.A {
			t.Fatalf("seed %d: %v: want 4 As and 3 Bs between an A at each end", seed, got)
		}
	}
}

// A fake /proc: a comm with spaces and a parenthesis, a kernel thread,
// the traced tree (10 → 11) and one busy outsider.
func TestOthersLeavesOutTreeSelfAndKernel(t *testing.T) {
	root := t.TempDir()
	write := func(pid, comm string, ppid, flags, ticks int, io string) {
		dir := filepath.Join(root, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := pid + " (" + comm + ") S " + itoa(ppid) + " 1 1 0 -1 " + itoa(flags) + " 0 0 0 0 " + itoa(ticks) + " 0 0 0 20 0 1 0"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if io != "" {
			if err := os.WriteFile(filepath.Join(dir, "io"), []byte(io), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("10", "cat", 1, 0, 50, "read_bytes: 4096\nwrite_bytes: 0\n")
	write("11", "sub", 10, 0, 50, "")
	write("20", "web (x) y", 1, 0, 100, "read_bytes: 1000\nwrite_bytes: 24\n")
	write("2", "kthreadd", 0, pfKthread, 999, "")
	prev := scan(root)
	if prev[20].comm != "web (x) y" || prev[20].ticks != 100 || prev[20].ioBytes != 1024 || !prev[2].kthread {
		t.Fatalf("scan: %+v", prev)
	}
	write("20", "web (x) y", 1, 0, 180, "read_bytes: 2000\nwrite_bytes: 24\n")
	write("11", "sub", 10, 0, 500, "")
	write("30", "new", 1, 0, 7, "")
	cur := scan(root)
	exclude := treeOf(cur, map[int]bool{10: true})
	if !exclude[11] || exclude[20] {
		t.Fatalf("tree %v", exclude)
	}
	ticks, io, per := others(prev, cur, exclude)
	if ticks != 80+7 || io != 1000 || per[20] != 80 || per[30] != 7 {
		t.Errorf("others: ticks %d io %d per %v; want 87, 1000", ticks, io, per)
	}
	top := topBusy(per, map[int]string{20: "web (x) y", 30: "new"}, 1, userHZ, 1)
	if len(top) != 1 || top[0].PID != 20 || top[0].CPUs != 0.8 {
		t.Errorf("top %+v", top)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// NVML's untraced GPU processes flag a run once one used over 5% of SMs.
func TestGPUInterference(t *testing.T) {
	if gpuOthers(nil) != nil || gpuBusy(abtest.Interference{}) {
		t.Error("no GPU: nothing to flag")
	}
	g := &record.GPU{Interference: []record.GPUInterference{
		{PID: 9, Name: "llama-server", UtilPolls: 3, SMUtilMeanPct: 42},
		{PID: 10, Name: "Xorg", UtilPolls: 3, SMUtilMeanPct: 1},
	}}
	others := gpuOthers(g)
	if len(others) != 2 || others[0].PID != 9 || others[0].CPUs != 0.42 {
		t.Fatalf("%+v", others)
	}
	if !gpuBusy(abtest.Interference{GPUOthers: others}) || gpuBusy(abtest.Interference{GPUOthers: others[1:]}) {
		t.Error("42% SM busy, 1% not")
	}
}

// What the monitor costs per sample on this machine.
func BenchmarkScanProc(b *testing.B) {
	for range b.N {
		scan("/proc")
	}
}

func BenchmarkTreeRSS(b *testing.B) {
	m := newMonitor("/proc", time.Second, time.Second)
	m.released(1)
	for range b.N {
		m.sampleRSS()
	}
}
