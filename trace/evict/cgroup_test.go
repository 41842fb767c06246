package evict

import "testing"

func TestParseMemoryCgroup(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"12:memory:/thrash\n11:cpu,cpuacct:/\n0::/user.slice\n", "v1:/thrash"},
		{"0::/system.slice/x.service\n", "v2:/system.slice/x.service"},
		{"5:cpu:/a\n", ""},
		{"", ""},
	} {
		if got := parseMemoryCgroup(c.in); got != c.want {
			t.Errorf("parseMemoryCgroup(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSyscallName(t *testing.T) {
	if got := syscallName(221); got != "fadvise64" {
		t.Errorf("221: %q", got)
	}
	if got := syscallName(-1); got != "" {
		t.Errorf("-1: %q", got)
	}
	if got := syscallName(999); got != "syscall 999" {
		t.Errorf("999: %q", got)
	}
}
