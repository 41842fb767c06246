// Package testenv decides whether a test may use the kernel: tests that load
// eBPF programs need root and BTF, and `go test -short` (make test-unit)
// runs none of them, so the unit tests pass on any machine with Go and cgo.
package testenv

import (
	"os"
	"testing"
)

// BTFPath is where the running kernel publishes its BTF.
const BTFPath = "/sys/kernel/btf/vmlinux"

// RequireTracing skips t unless it may load and attach eBPF programs: not
// under -short, as root, on a kernel with BTF. Each skip says why.
func RequireTracing(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test loads eBPF programs (make test runs it as root)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to load eBPF programs (make test runs the tests as root)")
	}
	if _, err := os.Stat(BTFPath); err != nil {
		t.Skipf("kernel has no BTF (%s missing)", BTFPath)
	}
}

// RequireRoot skips t unless it runs as root and not under -short: for tests
// that need root for something other than BPF (users, cgroups, drop_caches).
func RequireRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test needs root (make test runs it as root)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs the tests as root)")
	}
}
