package selfsched

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

func policies(t *testing.T) map[int]uint32 {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint32{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if a, err := unix.SchedGetAttr(tid, 0); err == nil {
			out[tid] = a.Policy
		}
	}
	return out
}

// TestBackgroundAndBack: every thread goes to SCHED_BATCH and comes back
// to SCHED_OTHER; a process under another policy is left alone.
func TestBackgroundAndBack(t *testing.T) {
	if a, err := unix.SchedGetAttr(0, 0); err != nil || a.Policy != unix.SCHED_NORMAL {
		t.Skipf("the test runs under scheduling policy %v (%v), not SCHED_OTHER", a, err)
	}
	restore, err := Background()
	if err != nil {
		t.Fatal(err)
	}
	for tid, p := range policies(t) {
		if p != unix.SCHED_BATCH {
			t.Errorf("thread %d: policy %d, want SCHED_BATCH", tid, p)
		}
	}
	// Under SCHED_BATCH already: left alone, and its restore keeps it so.
	again, err := Background()
	if err != nil {
		t.Fatal(err)
	}
	if err := again(); err != nil {
		t.Fatal(err)
	}
	if p := policies(t); p[unix.Gettid()] != unix.SCHED_BATCH {
		t.Errorf("a second Background's restore changed the policy to %d", p[unix.Gettid()])
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	for tid, p := range policies(t) {
		if p != unix.SCHED_NORMAL {
			t.Errorf("thread %d: policy %d after restore, want SCHED_OTHER", tid, p)
		}
	}
}
