package pagecache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// probes owns the loaded object and its links.
type probes struct {
	objs  bpfpc.PagecacheObjects
	links []link.Link
	// mu guards exits, asked, spans, quiet and fillEnd: the read exits
	// attach from the wake ring's goroutine and come off from quiet's.
	mu    sync.Mutex
	exits []link.Link
	// asked holds the read exits asked for since they last came off
	// (lazy_woken's bits, in readExits order).
	asked [len(readExits)]bool
	// spans are the intervals in which read exits were attached.
	spans []exitSpan
	// quiet is closed to stop the watch that takes the read exits off
	// after a quiet spell; nil while none runs.
	quiet chan struct{}
	// watching is the running quiet watch, waited for by close.
	watching sync.WaitGroup
	// wake reads lazy_wake while the read exits wait for the first fill
	// that must end lazily, in the runtime's network poller (a reader
	// blocked in epoll_wait(2) holds a thread in a system call, which the
	// runtime's monitor thread keeps taking back).
	wake *probe.Ring
	// taskWorks: a task work closes each fill at the entry's return to
	// user space; false: a later look at the thread does (see
	// bpf/pagecache's task_works).
	taskWorks bool
	// fillEnd is how the attached programs end fills (record.FillEnd).
	fillEnd string
	// uringSubmits: the kernel has io_uring's submission tracepoint,
	// where on_uring_submit notes each read request's start.
	uringSubmits bool
	// rseqReturns: without task works, the kernel has rseq_update,
	// where on_rseq_return ends the fills of threads that switched out
	// inside them (attachRseq); rseq is its link while attached,
	// rseqSpans the intervals it was, rseqQuiet stops the watch that
	// takes it off after a quiet spell (nil while none runs).
	rseqReturns bool
	rseq        link.Link
	rseqSpans   []exitSpan
	rseqQuiet   chan struct{}
	// noReadExits: the read exits are never attached (--no-read-exits).
	noReadExits bool
}

// TaskWorksAllowed says whether this kernel lets a tracing program
// schedule a task work, which ends each fill at its kernel entry's return
// to user space; where it does not, fills end at the next look at the
// thread. kernel may be nil.
func TaskWorksAllowed(kernel *btf.Cache) (bool, error) {
	spec, err := bpfpc.LoadPagecache()
	if err != nil {
		return false, fmt.Errorf("probe task works: %w", err)
	}
	return taskWorksAllowed(spec, kernel)
}

// taskWorksAllowed says whether this kernel lets a tracing program
// schedule a task work: probe_task_work, loaded alone with task_works
// set (a few hundred instructions, against a retry of the whole object).
// A verifier refusal or a kernel without the kfunc is an answer, not an
// error.
func taskWorksAllowed(spec *ebpf.CollectionSpec, kernel *btf.Cache) (bool, error) {
	// A copy of that program alone: the variable's Set writes the copy's
	// data section, and copying every program was a millisecond of a
	// start.
	one := withPrograms(spec, func(name string) bool { return name == bpfpc.PagecacheProgProbeTaskWork })
	one.Types = nil // the load takes the types it needs from the instructions
	s := one.Copy()
	if err := s.Variables[bpfpc.PagecacheVarTaskWorks].Set(uint32(1)); err != nil {
		return false, fmt.Errorf("probe task works: %w", err)
	}
	s.Maps[bpfpc.PagecacheMapFillEnds].MaxEntries = 1
	var objs struct {
		Probe *ebpf.Program `ebpf:"probe_task_work"`
	}
	err := s.LoadAndAssign(&objs, &ebpf.CollectionOptions{Cache: kernel})
	var verr *ebpf.VerifierError
	switch {
	case err == nil:
		return true, objs.Probe.Close()
	case errors.As(err, &verr), errors.Is(err, ebpf.ErrNotSupported):
		return false, nil
	}
	return false, fmt.Errorf("probe task works: %w", err)
}

// load loads the page-cache object with the scheduler's shared maps in
// place of its own.
func load(shared, stacks map[string]*ebpf.Map, kernel *btf.Cache) (*probes, error) {
	spec, err := bpfpc.LoadPagecache()
	if err != nil {
		return nil, fmt.Errorf("load page-cache probes: %w", err)
	}
	p := &probes{}
	if p.taskWorks, err = taskWorksAllowed(spec, kernel); err != nil {
		return nil, fmt.Errorf("load page-cache probes: %w", err)
	}
	if p.taskWorks {
		if err := spec.Variables[bpfpc.PagecacheVarTaskWorks].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("load page-cache probes: %w", err)
		}
	} else {
		spec.Maps[bpfpc.PagecacheMapFillEnds].MaxEntries = 1
	}
	probe.SizeRing(spec, bpfpc.PagecacheMapPaths)
	repl := make(map[string]*ebpf.Map, len(shared)+len(stacks))
	for k, v := range shared {
		repl[k] = v
	}
	for k, v := range stacks {
		repl[k] = v
	}
	if stacks != nil {
		// Threads without a Python stack take their leaf native frame.
		if err := spec.Variables[bpfpc.PagecacheVarPyStacksOn].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("load page-cache probes: %w", err)
		}
	} else {
		// No walker (--no-stacks): its maps stay empty, so no walk
		// runs; they are made as small as they can be.
		for _, name := range []string{bpfpc.PagecacheMapPyConfs, bpfpc.PagecacheMapPyStacks, bpfpc.PagecacheMapPyNatives} {
			if m := spec.Maps[name]; m != nil {
				m.MaxEntries = 1
			}
		}
		if m := spec.Maps[bpfpc.PagecacheMapPyEvents]; m != nil {
			m.MaxEntries = uint32(os.Getpagesize())
		}
	}
	// Paths seen in another mount namespace wake the reader at once,
	// while the namespace's mounts can still be read; unknown (0), none
	// do.
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &st); err == nil {
		if err := spec.Variables[bpfpc.PagecacheVarSelfMntNs].Set(uint32(st.Ino)); err != nil {
			return nil, fmt.Errorf("load page-cache probes: %w", err)
		}
	}
	if p.uringSubmits, err = probe.HasTracepoint(kernel, "io_uring_submit_req"); err != nil {
		return nil, fmt.Errorf("load page-cache probes: %w", err)
	}
	if !p.uringSubmits {
		probe.StubProgram(spec.Programs[bpfpc.PagecacheProgOnUringSubmit])
	}
	if !p.taskWorks {
		if p.rseqReturns, err = probe.HasTracepoint(kernel, "rseq_update"); err != nil {
			return nil, fmt.Errorf("load page-cache probes: %w", err)
		}
	}
	if !p.rseqReturns {
		probe.StubProgram(spec.Programs[bpfpc.PagecacheProgOnRseqReturn])
	}
	if err := loadInLanes(spec, &p.objs, repl, kernel); err != nil {
		return nil, probe.LoadError("page-cache probes", err)
	}
	return p, nil
}

// largestFirst are the programs whose verification takes longest, the
// largest first: their lanes start first.
var largestFirst = []string{bpfpc.PagecacheProgOnAddToCache, bpfpc.PagecacheProgOnGetPages,
	bpfpc.PagecacheProgOnMapPages, bpfpc.PagecacheProgOnBioQueue, bpfpc.PagecacheProgOnFilemapFault}

// loadInLanes makes spec's maps (repl's in place of their own), then
// loads its programs each in a lane of its own, all at once, every
// program with the same maps, and assigns them all to objs. On an error
// nothing stays loaded. In two lanes, the longer of them was the end of
// coldtrace's start, 10 to 30 ms after the other, with a CPU idle: in
// one lane each, the last program to be checked is at most the largest.
func loadInLanes(spec *ebpf.CollectionSpec, objs *bpfpc.PagecacheObjects, repl map[string]*ebpf.Map, kernel *btf.Cache) error {
	// Every map first, the data sections too (a lane of its own would
	// give each lane its own .bss).
	mapSpec := withPrograms(spec, func(string) bool { return false })
	maps, err := ebpf.NewCollectionWithOptions(mapSpec, ebpf.CollectionOptions{MapReplacements: repl, Cache: kernel})
	if err != nil {
		return err
	}
	// The lanes clone what they take. At return the data sections go
	// (the programs hold them) and, after an error, every map.
	defer maps.Close()
	names := slices.Clone(largestFirst)
	for name := range spec.Programs {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	colls := make([]*ebpf.Collection, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		one := withPrograms(spec, func(n string) bool { return n == name })
		wg.Add(1)
		go func() {
			defer wg.Done()
			colls[i], errs[i] = ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: maps.Maps, Cache: kernel})
		}()
	}
	wg.Wait()
	merged := &ebpf.Collection{Programs: map[string]*ebpf.Program{}}
	for _, c := range colls {
		if c == nil {
			continue
		}
		for name, prog := range c.Programs {
			merged.Programs[name] = prog
		}
		c.Programs = nil
		c.Close() // the lane's copies of the maps
	}
	if err := errors.Join(errs...); err != nil {
		merged.Close()
		return err
	}
	if err := merged.Assign(&objs.PagecachePrograms); err != nil {
		merged.Close()
		return err
	}
	if err := maps.Assign(&objs.PagecacheMaps); err != nil {
		_ = objs.PagecachePrograms.Close()
		return err
	}
	// The variables are views of the data sections' memory, which stays
	// mapped while they are reachable (the read exits' watch reads one).
	if err := maps.Assign(&objs.PagecacheVariables); err != nil {
		_ = objs.PagecachePrograms.Close()
		_ = objs.PagecacheMaps.Close()
		return err
	}
	return nil
}

// attach attaches the programs; without task works, the read family's
// syscall exits too unless noReadExits.
func (p *probes) attach(noReadExits bool) error {
	o := &p.objs
	type tracepoint struct {
		name    string // the BTF tracepoint, or the classic one's event
		classic bool
		prog    *ebpf.Program
	}
	list := []tracepoint{
		{name: "mm_filemap_get_pages", prog: o.OnGetPages},
		{name: "mm_filemap_map_pages", prog: o.OnMapPages},
		{name: "mm_filemap_fault", prog: o.OnFilemapFault},
		{name: "mm_filemap_add_to_page_cache", prog: o.OnAddToCache},
		{name: "block_bio_queue", prog: o.OnBioQueue},
	}
	if p.uringSubmits {
		list = append(list, tracepoint{name: "io_uring_submit_req", prog: o.OnUringSubmit})
	}
	p.noReadExits = noReadExits
	switch {
	case p.taskWorks:
		p.fillEnd = record.FillEndTaskWork
	case noReadExits && !p.rseqReturns:
		p.fillEnd = record.FillEndNextLook
	default:
		if p.rseqReturns {
			if err := o.RseqEnds.Set(uint32(1)); err != nil {
				return fmt.Errorf("rseq returns: %w", err)
			}
		}
		if err := p.attachReadExitsLazily(); err != nil {
			return err
		}
		// With --no-read-exits, the fills whose return rseq does not
		// show end at the next look: the record says the least exact.
		p.fillEnd = record.FillEndReadExit
		if noReadExits {
			p.fillEnd = record.FillEndNextLook
		}
	}
	for _, a := range list {
		var l link.Link
		var err error
		if a.classic {
			l, err = link.Tracepoint("filemap", a.name, a.prog, nil)
		} else {
			l, err = link.AttachTracing(link.TracingOptions{Program: a.prog})
		}
		if err != nil {
			return fmt.Errorf("attach tracepoint %s: %w", a.name, err)
		}
		p.links = append(p.links, l)
	}
	return nil
}

// readExits are the syscalls whose exits end a fill where task works are
// refused: those that copy file pages to user space (or to another file)
// after their last page-cache event. Other entries end at the next look
// at the thread. The order is bpf/pagecache's read_exit_bit.
var readExits = [...]string{"read", "pread64", "readv", "preadv", "preadv2", "sendfile64", "copy_file_range", "splice", "io_uring_enter"}

// attachReadExitsLazily attaches on_read_exit to a read-family
// syscall's exit tracepoint once the first fill that must end lazily
// begins in that syscall (bpf/pagecache's wake_lazy): an attached
// syscall tracepoint puts every task of the machine on the syscall slow
// path (docs/performance.md), which a run that never fills a page from
// disk in a read then never causes, and each takes an RCU grace period
// to detach. A fill that began before the attach ends at its syscall's
// exit if that comes after, else at the next look. Once no fill has been
// seen for ReadExitsQuiet they come off again (watchQuiet), until the
// next fill asks.
func (p *probes) attachReadExitsLazily() error {
	// Each first fill of a syscall wakes the reader (wake_lazy): the
	// periodic look is only a backstop.
	wake, err := probe.StartRing(p.objs.LazyWake, lazyWakeLook, lazyWakeIdle, func(raw []byte) {
		if len(raw) < 4 {
			return
		}
		switch bit := binary.LittleEndian.Uint32(raw); {
		case bit == rseqBit:
			p.attachRseq()
		case int(bit) < len(readExits) && !p.noReadExits:
			p.attachReadExit(int(bit))
		}
	})
	if err != nil {
		return fmt.Errorf("read exits: %w", err)
	}
	p.wake = wake
	return nil
}

// readExitBits are lazy_woken's bits of the read exits
// (bpf/pagecache's READ_EXITS_ALL).
const readExitBits = 1<<len(readExits) - 1

// rseqBit is bpf/pagecache's RSEQ_BIT: a fill of a thread with an rseq
// area asks for on_rseq_return.
const rseqBit = 9

// attachRseq attaches on_rseq_return: where task works are refused, the
// fill of a thread with an rseq area (every thread of a glibc 2.35+
// program) that switched out inside it (a cold read waiting for its
// disk) then ends at its return to user space, as a task work would end
// it, without a syscall tracepoint. Other processes pay the program's
// tracked test at each of their returns after a switch (a pipe
// ping-pong beside a run about 3% more), so, like the read exits, it
// comes off once no fill has asked for it for ReadExitsQuiet and goes
// on again at the next. If it cannot be attached, rseq_ends goes back
// to 0 and such fills ask for their syscall's exit as others do.
func (p *probes) attachRseq() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rseq != nil || p.objs.OnRseqReturn == nil {
		return
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: p.objs.OnRseqReturn})
	if err != nil {
		_ = p.objs.RseqEnds.Set(uint32(0))
		return
	}
	p.rseq = l
	p.rseqSpans = append(p.rseqSpans, exitSpan{from: probe.MonotonicNS()})
	p.rseqQuiet = make(chan struct{})
	p.watching.Add(1)
	go p.watchQuiet(p.rseqQuiet, p.detachRseqIfQuiet)
}

// detachRseqIfQuiet takes on_rseq_return off if no fill asked for it
// for ReadExitsQuiet since it went on, and says whether it did. Its bit
// in lazy_woken is cleared first, so that a fill beginning while it
// comes off asks again (the ask waits for mu, then attaches anew); a
// fill already switched out ends at the next look instead of at its
// return.
func (p *probes) detachRseqIfQuiet(stop chan struct{}) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rseqQuiet != stop {
		return true
	}
	if !quietSince(p.objs.RseqSeenNs, p.rseqSpans[len(p.rseqSpans)-1].from) {
		return false
	}
	if !p.clearAsked(1 << rseqBit) {
		return false
	}
	// An error leaves the link attached until close, which tries again;
	// the span ends here either way: on_rseq_return only ends the fills
	// of threads that switched out asking for it.
	if err := p.rseq.Close(); err == nil {
		p.rseq = nil
	}
	p.rseqSpans[len(p.rseqSpans)-1].to = probe.MonotonicNS()
	p.rseqQuiet = nil
	return true
}

// exitSpan is one interval in which read exits were attached
// (CLOCK_MONOTONIC ns; to is 0 while they are).
type exitSpan struct{ from, to uint64 }

// attachReadExit attaches on_read_exit to the exit of readExits[bit]; a
// syscall this kernel has no tracepoint for is passed over. If one
// cannot be attached, the run's fills count as ending at the next look
// (the record says so), though those attached still end theirs.
func (p *probes) attachReadExit(bit int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asked[bit] || p.objs.OnReadExit == nil {
		return // asked twice (the bits are set without a lock), or closed
	}
	p.asked[bit] = true
	l, err := link.Tracepoint("syscalls", "sys_exit_"+readExits[bit], p.objs.OnReadExit, nil)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		p.fillEnd = record.FillEndNextLook
	default:
		p.exits = append(p.exits, l)
		if p.quiet == nil {
			p.spans = append(p.spans, exitSpan{from: probe.MonotonicNS()})
			p.quiet = make(chan struct{})
			p.watching.Add(1)
			go p.watchQuiet(p.quiet, p.detachIfQuiet)
		}
	}
}

// ReadExitsQuiet is how long no fill that must end lazily may be seen
// before the read exits come off: longer than the gaps between a
// loader's reads (a model's shards, an import's modules), short enough
// that a run which loads and then computes stops slowing the machine's
// other processes soon after. Taking them off and on again costs a
// grace period in the background and a few hundred microseconds.
const ReadExitsQuiet = time.Second

// watchQuiet calls detach every quarter of ReadExitsQuiet until it says
// it took its programs off (the read exits once bpf/pagecache's
// lazy_seen_ns has not moved for ReadExitsQuiet, on_rseq_return once
// rseq_seen_ns has not), or returns when stop is closed.
func (p *probes) watchQuiet(stop chan struct{}, detach func(chan struct{}) bool) {
	defer p.watching.Done()
	tick := time.NewTicker(ReadExitsQuiet / 4)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if detach(stop) {
			return
		}
	}
}

// quietSince says whether the stamp seen (CLOCK_MONOTONIC ns, written
// by the kernel) and from, when the programs went on, are both
// ReadExitsQuiet or more ago. An unreadable stamp is not quiet: the
// programs stay on, and the record stays true.
func quietSince(seen *ebpf.Variable, from uint64) bool {
	var ns uint64
	if err := seen.Get(&ns); err != nil {
		return false
	}
	return probe.MonotonicNS() >= max(ns, from)+uint64(ReadExitsQuiet)
}

// detachIfQuiet takes the read exits off if no fill was seen for
// ReadExitsQuiet since they went on, and says whether it did. The bits
// asked for are cleared first, so that a fill beginning while they come
// off asks again (its ask waits for mu, then attaches anew); one whose
// bit the kernel set in the same instant the bits were cleared is not
// asked for, and ends at the next look.
func (p *probes) detachIfQuiet(stop chan struct{}) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quiet != stop {
		return true
	}
	if !quietSince(p.objs.LazySeenNs, p.spans[len(p.spans)-1].from) {
		return false
	}
	// on_rseq_return has a watch of its own: its bit stays as it is.
	if !p.clearAsked(readExitBits) {
		return false
	}
	p.asked = [len(readExits)]bool{}
	// An error leaves a link attached until close, which tries again;
	// the span ends here either way: on_read_exit only ends the fills
	// of threads that ask for it.
	_ = probe.CloseLinks(p.exits)
	p.exits = nil
	p.spans[len(p.spans)-1].to = probe.MonotonicNS()
	p.quiet = nil
	return true
}

// clearAsked clears the bits of mask in lazy_woken, so that the next
// fill that needs their programs asks for them anew, and says whether it
// could. A bit the kernel sets between the read and the write is lost
// from the word, not the ask: the ring carries it, and a later fill of
// the same kind asks once more.
func (p *probes) clearAsked(mask uint32) bool {
	var woken uint32
	if err := p.objs.LazyWoken.Get(&woken); err != nil {
		return false
	}
	return p.objs.LazyWoken.Set(woken&^mask) == nil
}

// lazyWakeLook and lazyWakeIdle bound how long a wake-up the kernel
// queued without waking the reader waits for it.
const (
	lazyWakeLook = 100 * time.Millisecond
	lazyWakeIdle = 2 * time.Second
)

// readExits says how fills ended, and when the read exits were
// attached (CLOCK_MONOTONIC ns).
func (p *probes) readExitSpans() ([]exitSpan, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.spans), p.fillEnd
}

// rseqReturnSpans says when on_rseq_return was attached
// (CLOCK_MONOTONIC ns).
func (p *probes) rseqReturnSpans() []exitSpan {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.rseqSpans)
}

func (p *probes) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = err
		}
	}
	if p.wake != nil {
		keep(p.wake.Close())
	}
	p.mu.Lock()
	if p.quiet != nil {
		close(p.quiet)
		p.quiet = nil
	}
	if p.rseqQuiet != nil {
		close(p.rseqQuiet)
		p.rseqQuiet = nil
	}
	// All at once: each waits for an RCU grace period, and their perf
	// events are then destroyed one after another under the kernel's
	// trace-event lock (the nine one after another took 0.56 s, at once
	// about 0.37 s; a run that read only by read(2) has one).
	keep(probe.CloseLinks(p.exits))
	p.exits = nil
	if p.rseq != nil {
		keep(p.rseq.Close())
		p.rseq = nil
	}
	p.mu.Unlock()
	p.watching.Wait()
	for i := len(p.links) - 1; i >= 0; i-- {
		keep(p.links[i].Close())
	}
	p.links = nil
	keep(p.objs.Close())
	return first
}

// withPrograms is spec with only the programs keep keeps, sharing the rest
// with spec: a load copies each map and program it makes (spec stays as
// it was, and loads at once may share it), where a copy of every
// program's instructions for each load here was some 2 ms of CPU at a
// start that is all CPU.
func withPrograms(spec *ebpf.CollectionSpec, keep func(name string) bool) *ebpf.CollectionSpec {
	s := *spec
	s.Programs = make(map[string]*ebpf.ProgramSpec, len(spec.Programs))
	for name, p := range spec.Programs {
		if keep(name) {
			s.Programs[name] = p
		}
	}
	return &s
}
