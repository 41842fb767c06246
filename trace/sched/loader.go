package sched

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// Shared are the maps of the scheduler object that the other BPF objects
// take as map replacements: task storage (present for tracked threads:
// the tracked set), the per-thread counters by slot, and the per-file
// counters (the page-cache sensor's, written here at context switches).
type Shared struct {
	TaskStates *ebpf.Map
	Threads    *ebpf.Map
	Files      *ebpf.Map
	// RunPages marks the pages the run read from disk and those evicted
	// since (the page-cache and eviction sensors').
	RunPages *ebpf.Map
	// FileStacks charges the files' fill time per Python stack (the
	// page-cache sensor reads it).
	FileStacks *ebpf.Map
	// Tracked is a bit per process any of whose threads is tracked: what
	// every object's programs test before the task storage.
	Tracked *ebpf.Map
}

// Replacements are the shared maps by their names in the BPF objects, for
// ebpf.CollectionOptions.MapReplacements.
func (s Shared) Replacements() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		bpfsched.SchedMapTaskStates:   s.TaskStates,
		bpfsched.SchedMapThreads:      s.Threads,
		bpfsched.SchedMapFiles:        s.Files,
		bpfsched.SchedMapRunPages:     s.RunPages,
		bpfsched.SchedMapFileStacks:   s.FileStacks,
		bpfsched.SchedMapTrackedTgids: s.Tracked,
	}
}

// probes owns the loaded object and its links.
type probes struct {
	objs  bpfsched.SchedObjects
	spec  *ebpf.CollectionSpec // until the programs are loaded
	links []link.Link
	// tracked is the tracked_tgids map, mapped here.
	tracked *trackedBits
	ncpus   int
	// reserved slots are for threads seeded from user space (attach);
	// nextOwn is the next of them not yet handed out.
	reserved, nextOwn int
}

func load(o Options) (*probes, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise memlock limit: %w", err)
	}
	spec, err := bpfsched.LoadSched()
	if err != nil {
		return nil, fmt.Errorf("load scheduler probes: %w", err)
	}
	ncpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count CPUs: %w", err)
	}
	if err := spec.Variables[bpfsched.SchedVarNcpus].Set(uint32(ncpus)); err != nil {
		return nil, fmt.Errorf("load scheduler probes: %w", err)
	}
	if o.TraceSecureExec {
		if err := spec.Variables[bpfsched.SchedVarTraceSecureExec].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("load scheduler probes: %w", err)
		}
	}
	probe.SizeRing(spec, bpfsched.SchedMapEvents)
	p := &probes{ncpus: ncpus, spec: spec}
	// The maps alone: they need no kernel BTF, and the other objects
	// take them, so those load while this object's programs do.
	if err := spec.LoadAndAssign(&p.objs.SchedMaps, nil); err != nil {
		return nil, probe.LoadError("scheduler maps", err)
	}
	if p.tracked, err = mapTrackedBits(p.objs.TrackedTgids); err != nil {
		p.objs.Close()
		return nil, err
	}
	return p, nil
}

// loadPrograms loads the object's programs (and its data sections) on
// the maps load made.
func (p *probes) loadPrograms(kernel *btf.Cache) error {
	maps := probe.MapsByName(&p.objs.SchedMaps)
	var rest struct {
		bpfsched.SchedPrograms
		bpfsched.SchedVariables
	}
	if err := p.spec.LoadAndAssign(&rest, &ebpf.CollectionOptions{Cache: kernel, MapReplacements: maps}); err != nil {
		return probe.LoadError("scheduler probes", err)
	}
	p.objs.SchedPrograms, p.objs.SchedVariables = rest.SchedPrograms, rest.SchedVariables
	p.spec = nil
	return nil
}

func (p *probes) attach() error {
	o := &p.objs
	for _, a := range []struct {
		name string
		prog *ebpf.Program
	}{
		{"sched_switch", o.OnSwitch},
		{"sched_process_fork", o.OnFork},
		{"task_newtask", o.OnNewtask},
		{"sched_process_exec", o.OnExec},
		{"sched_process_exit", o.OnExit},
	} {
		l, err := link.AttachTracing(link.TracingOptions{Program: a.prog})
		if err != nil {
			return fmt.Errorf("attach tracepoint %s: %w", a.name, err)
		}
		p.links = append(p.links, l)
	}
	return nil
}

// seed makes tid the first tracked thread: everything it forks is tracked
// from then on by the kernel side. Its counters take slot 0 of the thread
// array; its task storage is written through a pidfd.
func (p *probes) seed(tid int, nowNS uint64) error {
	t := seededThread(tid, tid, nowNS)
	if err := p.objs.Threads.Update(uint32(0), &t, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("track pid %d: %w", tid, err)
	}
	fd, err := unix.PidfdOpen(tid, 0)
	if err != nil {
		return fmt.Errorf("track pid %d: pidfd: %w", tid, err)
	}
	defer unix.Close(fd)
	s := bpfsched.SchedTstate{Slot: 0, Tgid: uint32(tid)}
	p.tracked.set(uint32(tid))
	if err := p.objs.TaskStates.Update(uint32(fd), &s, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("track pid %d: task storage: %w", tid, err)
	}
	return nil
}

// slotsInUse is how far into the thread array slots have been handed out.
func (p *probes) slotsInUse() (int, error) {
	var per []uint32
	if err := p.objs.NextSlot.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	n := max(1, p.reserved)
	for cpu, v := range per {
		if v > 0 {
			n = max(n, 1+int(v-1)*p.ncpus+cpu+1)
		}
	}
	return min(n, int(p.objs.Threads.MaxEntries())), nil
}

func (p *probes) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = err
		}
	}
	for i := len(p.links) - 1; i >= 0; i-- {
		keep(p.links[i].Close())
	}
	p.links = nil
	keep(p.tracked.close())
	keep(p.objs.Close())
	return first
}

// schedClock is the kernel's own clocks of a thread so far, from
// /proc/PID/task/TID/schedstat: on a CPU (sum_exec_runtime) and waiting
// on a run queue (sched_info.run_delay, of the waits that have ended).
type schedClock struct {
	exec     uint64
	runDelay uint64
}

// readSchedClock is thread tid of pid's schedClock, zero if it cannot be
// read (gone). A seeded thread's first switch out splits the time since
// the seed with it; an exec of 0 counts all of it as CPU.
func readSchedClock(pid, tid int) schedClock {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
	if err != nil {
		return schedClock{}
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return schedClock{}
	}
	exec, err1 := strconv.ParseUint(f[0], 10, 64)
	delay, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return schedClock{}
	}
	return schedClock{exec: exec, runDelay: delay}
}

// seededThread is the first counters of thread tid of pid, tracked from
// nowNS: its state is not known until its next switch (flags 0), so the
// time to it counts as a wait, split by the thread's own clocks.
func seededThread(pid, tid int, nowNS uint64) bpfsched.SchedThread {
	c := readSchedClock(pid, tid)
	return bpfsched.SchedThread{Tid: uint32(tid), Tgid: uint32(pid), LastTs: nowNS, ExecNs: c.exec, RdelayNs: c.runDelay}
}
