package sched

import "testing"

// A process's life ends at its threads' last switch out when all of them
// were seen making it: after its exit event (the teardown runs after
// it), before wait(2) told the session (as late as the session's
// goroutine got a CPU). A thread still alive at the last poll (its final
// switch out unseen) leaves the end as it was.
func TestProcessEndIsTheLastSwitchOut(t *testing.T) {
	s := &Sensor{pollGen: 7}
	for _, c := range []struct {
		name string
		p    procAcc
		want int64
	}{
		{"exit event, teardown after it", procAcc{exited: true, end: 100, deadNS: 350, liveGen: 6}, 350},
		{"wait(2) late", procAcc{exited: true, waited: true, end: 900, deadNS: 400, liveGen: 3}, 400},
		{"a thread alive at the last poll", procAcc{exited: true, end: 100, deadNS: 350, liveGen: 7}, 100},
		{"no final switch seen", procAcc{exited: true, waited: true, end: 900}, 900},
		{"still running", procAcc{end: 0, deadNS: 50, liveGen: 2}, 0},
	} {
		if got := s.processEnd(&c.p); got != c.want {
			t.Errorf("%s: end %d, want %d", c.name, got, c.want)
		}
	}
}
