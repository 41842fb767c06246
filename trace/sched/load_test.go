package sched

import (
	"testing"

	"github.com/cilium/ebpf"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// TestLoadPollClose loads and attaches the scheduler probes, polls them
// once and closes them: every map and program is released.
func TestLoadPollClose(t *testing.T) {
	testenv.RequireTracing(t)
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sample record.Sample
	if err := s.Poll(probe.MonotonicNS(), &sample); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// TestWaitingDropsChargedWaits: a poll projects an ongoing I/O wait up to
// now; once the thread has run again (the kernel charged the wait to its
// file), Waiting no longer offers the projection, so a file read after
// that switch cannot count the wait twice. Slot 0 is written by hand: no
// task is seeded, so the probes never touch it.
func TestWaitingDropsChargedWaits(t *testing.T) {
	testenv.RequireTracing(t)
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	file := bpfsched.SchedFileKey{Dev: 8, Ino: 4242}
	now := probe.MonotonicNS()
	waiting := bpfsched.SchedThread{Tid: 99999, Tgid: 99999, Flags: tfOutIO, LastTs: now - 5e6, WaitFile: file}
	if err := s.p.objs.Threads.Update(uint32(0), &waiting, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	var sample record.Sample
	if err := s.Poll(now, &sample); err != nil {
		t.Fatal(err)
	}
	key := probe.FileKey{Dev: file.Dev, Ino: file.Ino}
	io, _ := s.Waiting()
	if io[key] != 5e6 {
		t.Fatalf("ongoing wait projected as %d ns, want 5ms: %v", io[key], io)
	}
	// The thread runs again: the kernel adds the wait to the thread and
	// its file, and the slot shows a new switch.
	ran := waiting
	ran.Flags, ran.LastTs, ran.IowaitNs = tfOnCPU, now+1e6, 6e6
	if err := s.p.objs.Threads.Update(uint32(0), &ran, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if io, _ := s.Waiting(); len(io) != 0 {
		t.Fatalf("a wait the kernel charged is still projected: %v", io)
	}
}
