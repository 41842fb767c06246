package trace

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/bpf"
)

// Thread-table flags, mirrored from bpf/common.h.
const (
	tfOnCPU     = 1 << 0
	tfOutIO     = 1 << 1
	tfOutRunQ   = 1 << 2
	tfExited    = 1 << 6
	tfDead      = 1 << 8
	evFork      = 1
	evExec      = 2
	evExit      = 3
	evPath      = 4
	lostRing    = 0
	lostFiles   = 1
	lostThread  = 2
	lostPaths   = 3
	lostFillEnd = 4
)

// probes owns the loaded BPF objects, their links and the ring-buffer
// reader. Close releases all of them; nothing outlives the process.
type probes struct {
	objs   bpf.ColdtraceObjects
	links  []link.Link
	events *ringbuf.Reader
	ncpus  int
}

// attachment names one program and how it attaches, so a failure can say
// which tracepoint is missing.
type attachment struct {
	name    string // "group:event" or the BTF tracepoint name
	classic bool
	group   string
	prog    *ebpf.Program
}

func loadProbes() (*probes, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise memlock limit: %w", err)
	}
	p := &probes{}
	spec, err := bpf.LoadColdtrace()
	if err != nil {
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	ncpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count CPUs: %w", err)
	}
	if err := spec.Variables[bpf.ColdtraceVarNcpus].Set(uint32(ncpus)); err != nil {
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	p.ncpus = ncpus
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("load BPF programs (verifier rejected them): %+v", verr)
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			return nil, fmt.Errorf("load BPF programs: the kernel lacks something coldtrace needs (Linux 6.18 or later, for the BPF task-work kfuncs): %w", err)
		}
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	return p, nil
}

func (p *probes) attach() error {
	o := &p.objs
	list := []attachment{
		{name: "sched_switch", prog: o.OnSwitch},
		{name: "sched_process_fork", prog: o.OnFork},
		{name: "sched_process_exec", prog: o.OnExec},
		{name: "sched_process_exit", prog: o.OnExit},
		{name: "mm_filemap_get_pages", prog: o.OnGetPages},
		{name: "mm_filemap_map_pages", prog: o.OnMapPages},
		{name: "mm_filemap_fault", prog: o.OnFilemapFault},
		{name: "mm_filemap_add_to_page_cache", prog: o.OnAddToCache},
		{name: "mm_filemap_delete_from_page_cache", classic: true, group: "filemap", prog: o.OnDeleteFromCache},
	}
	for _, a := range list {
		var l link.Link
		var err error
		if a.classic {
			l, err = link.Tracepoint(a.group, a.name, a.prog, nil)
		} else {
			l, err = link.AttachTracing(link.TracingOptions{Program: a.prog})
		}
		if err != nil {
			return fmt.Errorf("attach tracepoint %s: %w", a.name, err)
		}
		p.links = append(p.links, l)
	}
	rd, err := ringbuf.NewReader(o.Events)
	if err != nil {
		return fmt.Errorf("open ring buffer: %w", err)
	}
	p.events = rd
	return nil
}

// seed makes tid the first tracked thread: everything it forks is tracked
// from then on by the kernel side. Its counters take slot 0 of the thread
// array; its task storage is written through a pidfd.
func (p *probes) seed(tid int, nowNS uint64) error {
	t := bpf.ColdtraceThread{Tid: uint32(tid), Tgid: uint32(tid), LastTs: nowNS}
	if err := p.objs.Threads.Update(uint32(0), &t, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("track pid %d: %w", tid, err)
	}
	fd, err := unix.PidfdOpen(tid, 0)
	if err != nil {
		return fmt.Errorf("track pid %d: pidfd: %w", tid, err)
	}
	defer unix.Close(fd)
	s := bpf.ColdtraceTstate{Slot: 0, Tgid: uint32(tid)}
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
	n := 1
	for cpu, v := range per {
		if v > 0 {
			n = max(n, 1+int(v-1)*p.ncpus+cpu+1)
		}
	}
	return min(n, int(p.objs.Threads.MaxEntries())), nil
}

// Close closes the reader first, then links and objects, keeping the first
// error.
func (p *probes) Close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = err
		}
	}
	if p.events != nil {
		keep(p.events.Close())
	}
	for i := len(p.links) - 1; i >= 0; i-- {
		keep(p.links[i].Close())
	}
	p.links = nil
	keep(p.objs.Close())
	return first
}
