package sched

import (
	"os"
	"runtime"
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
// new is projected whole without asking: sleeping threads are not read
// at every poll.
func TestProjectionAsksTheClockOfANewWait(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := os.Getpid(), unix.Gettid()
	spin := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	spin(time.Millisecond) // a clock that has started
	before := execNS(pid, tid)
	if before == 0 {
		t.Skip("no /proc/PID/task/TID/schedstat: the kernel keeps no schedstat")
	}
	switchedOut := probe.MonotonicNS()
	spin(30 * time.Millisecond)
	now := probe.MonotonicNS()
	d := int64(now - switchedOut)
	for _, c := range []struct {
		name  string
		flags uint32
		fresh bool
		asked bool
	}{
		{"new sleep", 0, true, true},
		{"old sleep", 0, false, false},
		{"new run-queue wait", tfOutRunQ, true, true},
		{"old run-queue wait over 20 ms", tfOutRunQ, false, true},
	} {
		v := &bpfsched.SchedThread{Tid: uint32(tid), Tgid: uint32(pid), LastTs: switchedOut, ExecNs: before, Flags: c.flags}
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
