package sched

import (
	"testing"
	"unsafe"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// TestSecureExecEventListsUntraced: the kernel's report of a secure exec
// becomes one record.Untraced with the program, the pid, the reason and
// the time since the run's start, in the order reported; the process
// stays in the table, its traced life ending there, not exited (it runs
// on, untraced).
func TestSecureExecEventListsUntraced(t *testing.T) {
	s := &Sensor{tracked: probe.NewPIDSet(), threads: map[uint32]*threadAcc{}, procs: map[int32]*procAcc{}, startMono: 1e9}
	send := func(pid uint32, path string, reason bpfsched.SchedSecureExecReason, ts uint64) {
		ev := bpfsched.SchedTaskEvent{Kind: uint32(bpfsched.SchedTaskEventKindEV_UNTRACK), Pid: pid, Tid: pid, Ppid: 7, Ts: ts, Reason: uint32(reason)}
		for i := range len(path) {
			ev.Filename[i] = int8(path[i])
		}
		copy(ev.Comm[:], []int8{'s', 'u', 'd', 'o'})
		s.handle(unsafe.Slice((*byte)(unsafe.Pointer(&ev)), unsafe.Sizeof(ev)))
	}
	send(40, "/usr/bin/sudo", bpfsched.SchedSecureExecReasonSX_SETUID, 1e9+5e6)
	send(41, "/usr/bin/wall", bpfsched.SchedSecureExecReasonSX_SETGID, 1e9+6e6)
	send(42, "/usr/bin/ping", bpfsched.SchedSecureExecReasonSX_CAPS, 1e9+7e6)
	var r record.Record
	s.fill(&r)
	r.Untraced = append(r.Untraced, s.untraced...)
	want := []record.Untraced{
		{Path: "/usr/bin/sudo", PID: 40, Reason: record.UntracedSetuid, AtNS: 5e6},
		{Path: "/usr/bin/wall", PID: 41, Reason: record.UntracedSetgid, AtNS: 6e6},
		{Path: "/usr/bin/ping", PID: 42, Reason: record.UntracedCapabilities, AtNS: 7e6},
	}
	if len(r.Untraced) != len(want) {
		t.Fatalf("untraced = %+v, want %+v", r.Untraced, want)
	}
	for i := range want {
		if r.Untraced[i] != want[i] {
			t.Errorf("untraced[%d] = %+v, want %+v", i, r.Untraced[i], want[i])
		}
	}
	if p := s.procs[40]; p == nil || p.exited || p.comm != "sudo" || p.ppid != 7 || p.end != 5e6 {
		t.Errorf("process 40 after its secure exec: %+v", p)
	}
}
