package sched

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// pidfdThread is PIDFD_THREAD (O_EXCL, Linux 6.9): a pidfd for one
// thread, not its thread group, so task storage is written on that
// thread's task.
const pidfdThread = unix.O_EXCL

// ErrThreadTable is returned when no slot is left for a thread to seed.
var ErrThreadTable = errors.New("thread table full")

// Reserve sets aside the first n slots of the thread table for threads
// seeded from user space (SeedThread): the kernel then hands out fresh
// slots past them. It must be called before anything is tracked, since a
// tracked fork takes slots from the same table.
func (s *Sensor) Reserve(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p.reserve(n)
}

// SeedThread tracks an existing thread tid of process pid from now on:
// it gets a slot of its own and its task storage is created through a
// pidfd for that thread, so its switches are counted and what it forks
// is tracked by the kernel side. Seeding a thread already tracked does
// nothing and reports false.
func (s *Sensor) SeedThread(pid, tid int, nowNS uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seeded, err := s.p.seedThread(pid, tid, nowNS)
	if err != nil || !seeded {
		return seeded, err
	}
	if _, known := s.procs[int32(pid)]; !known {
		// A process that joins later (a cgroup's) lives from now on, as
		// far as the trace knows.
		s.proc(int32(pid)).start = probe.Rel(nowNS, s.startMono)
	}
	return true, nil
}

// Named sets what a seeded process is called (from /proc), for the ones
// the ring buffer never told about.
func (s *Sensor) Named(pid int, comm, exe string, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc(int32(pid))
	if p.comm == "" {
		p.comm = comm
	}
	if p.exe == "" {
		p.exe = exe
	}
	if p.args == nil {
		p.args = args
	}
}

func (p *probes) reserve(n int) error {
	if n < 1 {
		n = 1
	}
	if n > int(p.objs.Threads.MaxEntries())/2 {
		return fmt.Errorf("reserve %d thread slots: %w", n, ErrThreadTable)
	}
	// The kernel hands CPU c slots 1 + v*ncpus + c; starting every CPU at
	// v = ceil(n/ncpus) keeps them all at n+1 or above.
	v := uint32((n + p.ncpus - 1) / p.ncpus)
	per := make([]uint32, p.ncpus)
	for i := range per {
		per[i] = v
	}
	if err := p.objs.NextSlot.Update(uint32(0), per, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("reserve %d thread slots: %w", n, err)
	}
	p.reserved = int(v)*p.ncpus + 1
	p.nextOwn = 0
	return nil
}

// ownSlot is a slot for a thread seeded from user space: one the kernel
// recycled, else the next of the reserved ones.
func (p *probes) ownSlot() (uint32, error) {
	var slot uint32
	if err := p.objs.FreeSlots.LookupAndDelete(nil, &slot); err == nil {
		return slot, nil
	}
	if p.nextOwn >= p.reserved {
		return 0, ErrThreadTable
	}
	slot = uint32(p.nextOwn)
	p.nextOwn++
	return slot, nil
}

func (p *probes) seedThread(pid, tid int, nowNS uint64) (bool, error) {
	fd, err := unix.PidfdOpen(tid, pidfdThread)
	if err != nil {
		return false, fmt.Errorf("track thread %d of pid %d: pidfd: %w", tid, pid, err)
	}
	defer unix.Close(fd)
	var cur bpfsched.SchedTstate
	if err := p.objs.TaskStates.Lookup(uint32(fd), &cur); err == nil {
		return false, nil
	}
	slot, err := p.ownSlot()
	if err != nil {
		return false, fmt.Errorf("track thread %d of pid %d: %w", tid, pid, err)
	}
	t := seededThread(pid, tid, nowNS)
	if err := p.objs.Threads.Update(slot, &t, ebpf.UpdateAny); err != nil {
		return false, fmt.Errorf("track thread %d of pid %d: %w", tid, pid, err)
	}
	st := bpfsched.SchedTstate{Slot: slot, Tgid: uint32(pid)}
	if pythonProcess(pid) {
		st.Flags = tfPython // as at an exec of it (on_exec)
	}
	p.tracked.set(uint32(pid))
	if err := p.objs.TaskStates.Update(uint32(fd), &st, ebpf.UpdateNoExist); err != nil {
		var free bpfsched.SchedThread
		_ = p.objs.Threads.Update(slot, &free, ebpf.UpdateAny)
		_ = p.objs.FreeSlots.Update(nil, slot, ebpf.UpdateAny)
		if errors.Is(err, ebpf.ErrKeyExist) {
			return false, nil // forked from a seeded thread meanwhile
		}
		return false, fmt.Errorf("track thread %d of pid %d: task storage: %w", tid, pid, err)
	}
	return true, nil
}

// pythonProcess says whether pid runs a Python interpreter, as on_exec
// decides it for a command: its program's base name starts with "python"
// (a script's interpreter is the program /proc shows).
func pythonProcess(pid int) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && strings.HasPrefix(filepath.Base(exe), "python")
}
