package machine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func TestMemoryCgroup(t *testing.T) {
	for _, c := range []struct {
		in      string
		version int
		path    string
	}{
		{"12:memory:/thrash\n11:cpu,cpuacct:/\n0::/user.slice\n", 1, "/thrash"},
		{"3:cpuset,memory:/a/b\n", 1, "/a/b"},
		{"0::/system.slice/x.service\n", 2, "/system.slice/x.service"},
		{"5:cpu:/a\n", 0, ""},
	} {
		v, p := MemoryCgroup(c.in)
		if v != c.version || p != c.path {
			t.Errorf("MemoryCgroup(%q) = %d %q, want %d %q", c.in, v, p, c.version, c.path)
		}
	}
}

func TestReadLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := readLimit(write("a", "268435456\n")); got != 256<<20 {
		t.Errorf("limit: %d", got)
	}
	if got := readLimit(write("b", "9223372036854771712\n")); got != 0 {
		t.Errorf("v1 unlimited: %d", got)
	}
	if got := readLimit(write("c", "max\n")); got != 0 {
		t.Errorf("v2 max: %d", got)
	}
	if got := readLimit(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("missing: %d", got)
	}
	if lowest(0, 5) != 5 || lowest(7, 0) != 7 || lowest(7, 5) != 5 {
		t.Error("lowest")
	}
}

func TestOthers(t *testing.T) {
	s := &Sensor{self: 1, opts: Options{Traced: func(pid int32) bool { return pid == 10 }},
		startCPU: map[int]cpuMark{2: {"sh", 1e9}, 3: {"sh", 0}, 10: {"reader", 0}}}
	s.others(&s.m, map[int]cpuMark{1: {"coldtrace", 5e9}, 2: {"sh", 3e9}, 3: {"sh", 1e9}, 4: {"kswapd0", 5e8}, 10: {"reader", 9e9}})
	want := []record.OtherCPU{{Comm: "sh", Processes: 2, CPUNS: 3e9}, {Comm: "kswapd0", Processes: 1, CPUNS: 5e8}}
	if len(s.m.Others) != 2 || s.m.Others[0] != want[0] || s.m.Others[1] != want[1] {
		t.Errorf("others %+v, want %+v", s.m.Others, want)
	}
	if s.m.OthersCPUNS != 3.5e9 || s.m.OthersCount != 3 {
		t.Errorf("totals %d ns, %d processes", s.m.OthersCPUNS, s.m.OthersCount)
	}
}
