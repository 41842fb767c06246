package sched

import (
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// A thread flagged as asleep since its last switch out, whose switch in
// the program never saw, has been running: a poll that projects the
// interval asks its clock when the interval is new to it, whatever the
// wait, and counts the run as CPU, not as a wait (under load such a
// thread ran most of a 20 ms poll flagged asleep). A sleep that is not
// new is projected whole without asking (sleeping threads are not read
// at every poll), and so is a new one under 5 ms (one read costs some
// 9 µs, the error it could mend is at most that wait).
func TestProjectionAsksTheClockOfANewWait(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := os.Getpid(), unix.Gettid()
	spin := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	spin(time.Millisecond) // a clock that has started
	before := readSchedClock(pid, tid).exec
	if before == 0 {
		t.Skip("no /proc/PID/task/TID/schedstat: the kernel keeps no schedstat")
	}
	switchedOut := probe.MonotonicNS()
	spin(30 * time.Millisecond)
	now := probe.MonotonicNS()
	for _, c := range []struct {
		name  string
		flags uint32
		fresh bool
		short bool // switched out 2 ms before the poll, not 30
		asked bool
	}{
		{"new sleep", 0, true, false, true},
		{"old sleep", 0, false, false, false},
		{"new run-queue wait", tfOutRunQ, true, false, true},
		{"old run-queue wait over 20 ms", tfOutRunQ, false, false, true},
		{"new sleep under 5 ms", 0, true, true, false},
	} {
		out := switchedOut
		if c.short {
			out = now - 2e6
		}
		d := int64(now - out)
		v := &bpfsched.SchedThread{Tid: uint32(tid), Tgid: uint32(pid), LastTs: out, ExecNs: before, Flags: c.flags}
		var cur threadTimes
		projectOngoing(v, 0, now, now, c.fresh, &cur)
		waited := cur.other + cur.runq
		if cur.cpu+waited != d {
			t.Errorf("%s: %d ns of CPU and %d of waits for an interval of %d", c.name, cur.cpu, waited, d)
		}
		// The thread ran nearly all of the interval (its clock lags by up
		// to a tick; the machine may have taken some).
		if asked := cur.cpu > d/4; asked != c.asked {
			t.Errorf("%s: %v of CPU, %v of waits in %v: asked its clock %v, want %v", c.name,
				time.Duration(cur.cpu), time.Duration(waited), time.Duration(d), asked, c.asked)
		}
	}
}

// A thread flagged on a CPU since its last switch in, whose switch out
// the program never saw, has been away: a poll that finds it so for over
// 20 ms splits the interval by the thread's own clocks into its run, its
// run-queue waits and, the rest, a sleep. Two spinning threads on one CPU
// wait on the run queue about half the time and never sleep: the split
// must find their waits run-queue waits, not "other" (before it, every
// wait behind an unseen switch out was booked as other).
func TestProjectionSplitsAnUnseenSwitchOutByTheRunQueueClock(t *testing.T) {
	// Both threads stay locked to their goroutines, which end with the
	// test: Go then ends the threads, so no thread pinned to CPU 0 goes
	// back to the runtime's pool.
	runtime.LockOSThread()
	var one unix.CPUSet
	one.Set(0)
	pid, tid := os.Getpid(), unix.Gettid()
	if err := unix.SchedSetaffinity(tid, &one); err != nil {
		t.Skipf("cannot pin to CPU 0: %v", err)
	}
	var stop atomic.Bool
	spinning := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		spinning <- unix.SchedSetaffinity(unix.Gettid(), &one)
		for !stop.Load() {
		}
	}()
	defer stop.Store(true)
	if err := <-spinning; err != nil {
		t.Skipf("cannot pin a second thread to CPU 0: %v", err)
	}
	spin := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	spin(10 * time.Millisecond)
	before := readSchedClock(pid, tid)
	if before.exec == 0 {
		t.Skip("no /proc/PID/task/TID/schedstat: the kernel keeps no sched_info")
	}
	switchedIn := probe.MonotonicNS()
	spin(200 * time.Millisecond)
	now := probe.MonotonicNS()
	d := int64(now - switchedIn)
	v := &bpfsched.SchedThread{Tid: uint32(tid), Tgid: uint32(pid), LastTs: switchedIn,
		ExecNs: before.exec, RdelayNs: before.runDelay, Flags: tfOnCPU}
	var cur threadTimes
	projectOngoing(v, 0, now, now, false, &cur)
	if cur.cpu+cur.runq+cur.other != d {
		t.Fatalf("%d ns of CPU, %d of run queue, %d other for an interval of %d", cur.cpu, cur.runq, cur.other, d)
	}
	// Sharing one CPU, each ran and waited about half; other processes
	// may take some of it too, but none of it was a sleep (the run-queue
	// wait going on at the end is not in the clock yet: a slice or so).
	t.Logf("interval %v: cpu %v, run queue %v, other %v", time.Duration(d),
		time.Duration(cur.cpu), time.Duration(cur.runq), time.Duration(cur.other))
	if cur.runq < d/5 {
		t.Errorf("run queue %v of %v: the run-queue clock did not split the wait", time.Duration(cur.runq), time.Duration(d))
	}
	if cur.other > d/5 {
		t.Errorf("other wait %v of %v: a spinner's wait booked as a sleep", time.Duration(cur.other), time.Duration(d))
	}
}
