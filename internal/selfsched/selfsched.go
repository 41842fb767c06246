// Package selfsched moves coldtrace's own threads out of the traced
// command's way while it runs, and back.
package selfsched

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Background puts every thread of this process under SCHED_BATCH and
// returns what puts them back under SCHED_OTHER. The threads keep their
// share of the CPUs, but one that wakes no longer preempts the task
// running on its CPU: it waits for that task's slice to end, or runs on
// an idle CPU. coldtrace's threads wake for their bookkeeping (ring
// reads, polls, the Go runtime's monitor thread every 20 µs while any of
// them runs), and at the default policy each wake-up on the traced
// command's CPU preempted it: 80–186 preemptions of a single-threaded
// cold import of 2,000 modules, one with this.
//
// A process started under another policy (real-time, idle, batch) is
// left as it is, and restore does nothing. Threads made later inherit
// the policy from the thread that makes them, and so would processes:
// call it only once the command's process exists, and restore before
// starting another.
func Background() (restore func() error, err error) {
	cur, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return func() error { return nil }, fmt.Errorf("read own scheduling policy: %w", err)
	}
	if cur.Policy != unix.SCHED_NORMAL {
		return func() error { return nil }, nil
	}
	if err := setAll(unix.SCHED_BATCH); err != nil {
		return func() error { return setAll(unix.SCHED_NORMAL) }, err
	}
	return func() error { return setAll(unix.SCHED_NORMAL) }, nil
}

// setAll sets policy on every thread of this process, reading the list
// twice for a thread made while it was read.
func setAll(policy uint32) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy}
	var first error
	for range 2 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("list own threads: %w", err)
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			// A thread may have exited since the list was read.
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && !errors.Is(err, unix.ESRCH) && first == nil {
				first = fmt.Errorf("set thread %d's scheduling policy: %w", tid, err)
			}
		}
	}
	return first
}
