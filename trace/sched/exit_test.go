package sched

import (
	"testing"
	"unsafe"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// TestWaitOutlivesExitEvent: the command's first process ends when
// wait(2) says (after the exit's teardown: a large address space freed
// after the exit event), even when its exit event is read later; its
// thread time, which runs to the last switch out, then fits its lifetime.
func TestWaitOutlivesExitEvent(t *testing.T) {
	s := &Sensor{tracked: probe.NewPIDSet(), threads: map[uint32]*threadAcc{}, procs: map[int32]*procAcc{}, startMono: 1e9}
	s.proc(40)
	s.Exited(40, 900e6, 3)
	ev := bpfsched.SchedTaskEvent{Kind: uint32(bpfsched.SchedTaskEventKindEV_EXIT), Pid: 40, Tid: 40, Ts: 1e9 + 700e6, ExitCode: 0}
	s.handle(unsafe.Slice((*byte)(unsafe.Pointer(&ev)), unsafe.Sizeof(ev)))
	if p := s.procs[40]; p.end != 900e6 || p.exitCode != 3 || !p.exited {
		t.Errorf("end %d exit code %d exited %v, want wait(2)'s 900 ms and 3", p.end, p.exitCode, p.exited)
	}
	// Another process ends at its exit event.
	s.proc(41)
	ev.Pid, ev.Tid, ev.ExitCode = 41, 41, 2<<8
	s.handle(unsafe.Slice((*byte)(unsafe.Pointer(&ev)), unsafe.Sizeof(ev)))
	if p := s.procs[41]; p.end != 700e6 || p.exitCode != 2 {
		t.Errorf("end %d exit code %d, want the event's 700 ms and 2", p.end, p.exitCode)
	}
}
