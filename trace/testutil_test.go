package trace

import (
	"os"
	"testing"
)

func requireTracing(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF programs (run the tests as root)")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("kernel has no BTF (/sys/kernel/btf/vmlinux missing)")
	}
}
