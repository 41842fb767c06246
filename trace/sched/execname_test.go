package sched

import (
	"os"
	"strings"
	"testing"
)

// TestExecNameOfAFullCopyIsTheKernelsName: a name shorter than the copy
// stays as exec was given it; one that fills the copy is replaced by
// /proc/PID/exe while the process lives, and said to be cut once it is
// gone.
func TestExecNameOfAFullCopyIsTheKernelsName(t *testing.T) {
	if name, cut := execName(os.Getpid(), "./short", 256); name != "./short" || cut {
		t.Errorf("short name: %q, cut %v", name, cut)
	}
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skipf("no /proc/self/exe: %v", err)
	}
	full := strings.Repeat("d/", 127) + "x" // 255 bytes: the copy is full
	if name, cut := execName(os.Getpid(), full[:len(self)-1], len(self)); name != self || cut {
		t.Errorf("full copy: %q, cut %v; want %q", name, cut, self)
	}
	if name, cut := execName(1<<30, full, len(full)+1); name != full || !cut {
		t.Errorf("full copy of a process gone: %q, cut %v", name, cut)
	}
}
