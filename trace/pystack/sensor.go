package pystack

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	bpfpy "github.com/coldtrace/coldtrace/bpf/pystack"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
	"golang.org/x/sys/unix"
)

// Options are the sensor's inputs from the session.
type Options struct {
	// TaskStates is the scheduler's tracked set (bpf/sched's task_states)
	// and Tracked its bit per process (tracked_tgids), tested first.
	TaskStates, Tracked *ebpf.Map
	// Threads is the scheduler's thread array, when given: otherwise the
	// object makes one of its own (bpf/include/common.h declares it), 7.5
	// MiB of kernel memory and milliseconds of the start.
	Threads *ebpf.Map
	BTF     *btf.Cache
}

// Bounds on user-space state, for a long run with many processes.
const (
	maxProcs = 1024
	maxCodes = 1 << 16
	// locateTries × locateWait bound how long the locator waits for the
	// loader to map libpython after an exec.
	locateTries = 200
	locateWait  = time.Millisecond
)

// Sensor takes Python stacks where traced Python processes fork.
type Sensor struct {
	objs  bpfpy.PystackObjects
	spec  *ebpf.CollectionSpec // until Start loads the programs
	links []link.Link
	// ring reads the walker's records in the runtime's network poller
	// (probe.Ring): a reader blocked in epoll_wait(2) holds a thread in
	// a system call, which the runtime's monitor thread keeps taking
	// back.
	ring *probe.Ring
	opts Options

	// LoadNS is how long loading and verifying the object took.
	LoadNS int64
	// noExecLocate leaves execs to the kernel's table of known
	// executables (tests of that table).
	noExecLocate atomic.Bool

	mu      sync.Mutex
	procs   map[uint32]*proc
	exes    map[exeID]bool // executables known not to be Python
	stacks  []record.PyStack
	byKey   map[string]int         // decoded stack → index in stacks
	byHash  map[uint64]int         // stack id → index in stacks
	hashPID map[uint64]uint32      // stack id → the process walked
	modules map[moduleID][]funcSym // function symbols of ELF files, for native leaves
	// pending are the ELF files whose symbols are read at the end, and
	// lazy the native frames that wait for them (native.go).
	pending map[moduleID]pendingModule
	lazy    []lazyFrame
	forks   map[uint32]uint64 // child pid → stack id
	unknown int               // frames decoded as "?"
	// internRec and internIdx index the stacks of the record Intern
	// last added to, by stackKey (1 + index).
	internRec *record.Record
	internIdx map[string]int
	notes     []string
	wg        sync.WaitGroup
}

type exeID struct{ dev, ino uint64 }

// proc is one located Python process.
type proc struct {
	interp *Interp
	mem    *procMem
	codes  map[FrameKey]*code
}

// New loads and attaches the walker (Prepare, then Start).
func New(opts Options) (*Sensor, error) {
	s, err := Prepare(opts)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Prepare creates the walker's maps only: Replacements is ready for an
// object that takes stacks itself, whose load need not wait for the
// walker's programs (Start). Close releases a walker never started.
func Prepare(opts Options) (*Sensor, error) {
	if opts.TaskStates == nil || opts.Tracked == nil {
		return nil, errors.New("load python stack probes: the core's task_states and tracked_tgids maps are required")
	}
	spec, err := bpfpy.LoadPystack()
	if err != nil {
		return nil, fmt.Errorf("load python stack probes: %w", err)
	}
	s := &Sensor{opts: opts, spec: spec, procs: map[uint32]*proc{}, exes: map[exeID]bool{}, byKey: map[string]int{},
		byHash: map[uint64]int{}, hashPID: map[uint64]uint32{}, forks: map[uint32]uint64{}, modules: map[moduleID][]funcSym{},
		pending: map[moduleID]pendingModule{}}
	shared := map[string]*ebpf.Map{bpfpy.PystackMapTaskStates: opts.TaskStates, bpfpy.PystackMapTrackedTgids: opts.Tracked}
	if opts.Threads != nil {
		shared[bpfpy.PystackMapThreads] = opts.Threads
	}
	if err := spec.LoadAndAssign(&s.objs.PystackMaps, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		return nil, fmt.Errorf("load python stack maps: %w", err)
	}
	return s, nil
}

// Start loads the walker's programs on the maps Prepare made and
// attaches them, once.
func (s *Sensor) Start() error {
	t0 := time.Now()
	maps := probe.MapsByName(&s.objs.PystackMaps)
	var rest struct {
		bpfpy.PystackPrograms
		bpfpy.PystackVariables
	}
	err := s.spec.LoadAndAssign(&rest, &ebpf.CollectionOptions{MapReplacements: maps, Cache: s.opts.BTF})
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return fmt.Errorf("load python stack probes (verifier rejected them): %+v", verr)
		}
		return fmt.Errorf("load python stack probes: %w", err)
	}
	s.objs.PystackPrograms, s.objs.PystackVariables = rest.PystackPrograms, rest.PystackVariables
	s.spec, s.opts.BTF = nil, nil // not held past the load
	s.LoadNS = time.Since(t0).Nanoseconds()
	return s.attach()
}

func (s *Sensor) attach() error {
	for name, p := range map[string]*ebpf.Program{"sched_process_fork": s.objs.OnPyFork, "sched_process_exec": s.objs.OnPyExec,
		"sched_process_exit": s.objs.OnPyExit} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attach %s: %w", name, err)
		}
		s.links = append(s.links, l)
	}
	// A new stack, a native leaf or an exec of an image not yet looked
	// at wakes the reader (decoded, or located, within milliseconds);
	// forks' records and execs of known images wait for the next
	// wake-up or look (bpf/pystack: emit).
	ring, err := probe.StartRing(s.objs.PyEvents, eventLook, eventLookIdle, s.handle)
	if err != nil {
		return fmt.Errorf("python stack records: %w", err)
	}
	s.ring = ring
	return nil
}

// eventLook and eventLookIdle bound how long a record the kernel queued
// without waking the reader waits for it.
const (
	eventLook     = 100 * time.Millisecond
	eventLookIdle = 2 * time.Second
)

// Program is the walker's fork program, for bpf_stats.
func (s *Sensor) Program() *ebpf.Program { return s.objs.OnPyFork }

// Seed locates an already running process (attach, or the launched
// command's first image).
func (s *Sensor) Seed(pid int) {
	s.wg.Add(1)
	go s.locate(uint32(pid))
}

// handle decodes one record of the walker.
func (s *Sensor) handle(raw []byte) {
	ev, ok := probe.Decode[bpfpy.PystackPyEvent](raw, unsafe.Sizeof(bpfpy.PystackPyEvent{}))
	if !ok {
		return
	}
	switch bpfpy.PystackPyEventKind(ev.Kind) {
	case bpfpy.PystackPyEventKindPY_EV_NATIVE:
		s.decodeNative(ev.Pid, ev.Stack, ev.Ip)
	case bpfpy.PystackPyEventKindPY_EV_EXEC_NATIVE:
		s.forget(ev.Pid)
	case bpfpy.PystackPyEventKindPY_EV_EXEC:
		s.forget(ev.Pid)
		if !s.noExecLocate.Load() {
			s.wg.Add(1)
			go s.locate(ev.Pid)
		}
	case bpfpy.PystackPyEventKindPY_EV_STACK:
		s.decodeStack(ev.Pid, ev.Stack)
	case bpfpy.PystackPyEventKindPY_EV_FORK:
		s.mu.Lock()
		s.forks[ev.Pid] = ev.Stack
		s.mu.Unlock()
	}
}

// forget drops what was known of pid's previous image.
func (s *Sensor) forget(pid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.procs[pid]; p != nil {
		p.mem.close()
		delete(s.procs, pid)
	}
}

// locate finds pid's interpreter, waiting for the loader to map
// libpython, and hands the walker its configuration.
func (s *Sensor) locate(pid uint32) {
	defer s.wg.Done()
	id, known := s.exeOf(pid)
	if known {
		return
	}
	var in *Interp
	var err error
	for try := 0; try < locateTries; try++ {
		if in, err = Locate(int(pid)); !errors.Is(err, errNotYet) {
			break
		}
		time.Sleep(locateWait)
	}
	if err != nil {
		s.noteFailure(id, err)
		return
	}
	if _, err := s.install(pid, in); err != nil {
		s.addNote(fmt.Sprintf("python stacks: pid %d: %v", pid, err))
		return
	}
	if in.Fixed {
		// Its next exec is configured in the kernel at once.
		key := bpfpy.PystackPyExeKey{Ino: id.ino, Dev: kernelDev(id.dev)}
		if err := s.objs.PyExes.Put(key, confOf(in)); err != nil {
			s.addNote(fmt.Sprintf("python stacks: remember %d's executable: %v", pid, err))
		}
	}
}

// kernelDev is a stat(2) device number in the kernel's own encoding
// (major<<20 | minor), as the exec program reads it from the superblock.
func kernelDev(dev uint64) uint32 {
	return unix.Major(dev)<<20 | unix.Minor(dev)
}

// exeOf is pid's executable's identity, and whether it is known not to
// be Python.
func (s *Sensor) exeOf(pid uint32) (exeID, bool) {
	st, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return exeID{}, true
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return exeID{}, false
	}
	id := exeID{uint64(sys.Dev), sys.Ino}
	s.mu.Lock()
	defer s.mu.Unlock()
	return id, s.exes[id]
}

func (s *Sensor) noteFailure(id exeID, err error) {
	if errors.Is(err, ErrNotPython) {
		s.mu.Lock()
		s.exes[id] = true
		s.mu.Unlock()
		// Its next execs need no forced wake-up of the reader (a zero
		// configuration says "not Python"); a full table only costs them
		// that wake-up.
		key := bpfpy.PystackPyExeKey{Ino: id.ino, Dev: kernelDev(id.dev)}
		_ = s.objs.PyExes.Put(key, bpfpy.PystackPyConf{})
		return
	}
	if errors.Is(err, ErrUnsupported) {
		s.addNote("python stacks: " + err.Error())
	}
}

func (s *Sensor) addNote(n string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.notes {
		if o == n {
			return
		}
	}
	if len(s.notes) < 16 {
		s.notes = append(s.notes, n)
	}
}

// install opens pid's memory and writes the walker's configuration.
func (s *Sensor) install(pid uint32, in *Interp) (*proc, error) {
	s.mu.Lock()
	if len(s.procs) >= maxProcs {
		s.pruneLocked()
	}
	full := len(s.procs) >= maxProcs
	s.mu.Unlock()
	if full {
		return nil, fmt.Errorf("more than %d python processes: no stacks for this one", maxProcs)
	}
	mem, err := openMem(int(pid))
	if err != nil {
		return nil, err
	}
	if err := s.objs.PyConfs.Put(pid, confOf(in)); err != nil {
		mem.close()
		return nil, fmt.Errorf("configure the walker: %w", err)
	}
	p := &proc{interp: in, mem: mem, codes: map[FrameKey]*code{}}
	s.mu.Lock()
	if old := s.procs[pid]; old != nil {
		old.mem.close()
	}
	s.procs[pid] = p
	s.mu.Unlock()
	return p, nil
}

// pruneLocked closes the memory of processes that have exited (or whose
// pid another process now has).
func (s *Sensor) pruneLocked() {
	for pid, p := range s.procs {
		if !p.mem.alive() {
			p.mem.close()
			delete(s.procs, pid)
		}
	}
}

func confOf(in *Interp) bpfpy.PystackPyConf {
	l := in.Layout
	c := bpfpy.PystackPyConf{Runtime: in.Runtime, CodeType: in.CodeType, InterpHead: l.InterpHead, ThreadsHead: l.ThreadsHead,
		TsNext: l.TSNext, TsNativeTid: l.TSNativeTID, TsCframe: l.TSCFrame, CframeCurrent: l.CurrentFrame,
		FrCode: l.FrCode, FrPrevious: l.FrPrevious, FrInstr: l.FrInstr, FrOwner: l.FrOwner, FrLocals: l.FrLocals,
		CoFilename: l.CoFilename, CoQualname: l.CoQualname, CoFirstlineno: l.CoFirstLineno}
	if l.SkipCStack {
		c.SkipCstack = 1
	}
	return c
}

// Begin is part of the session's sensor interface.
func (s *Sensor) Begin(uint64) {}

// Poll adds nothing to the timeline: stacks are decoded as they come.
func (s *Sensor) Poll(uint64, *record.Sample) error { return nil }

// Close detaches the probes and closes what was opened.
func (s *Sensor) Close() error {
	for _, l := range s.links {
		l.Close()
	}
	s.links = nil
	if s.ring != nil {
		s.ring.Close()
		s.ring = nil
	}
	s.wg.Wait()
	s.mu.Lock()
	for pid, p := range s.procs {
		p.mem.close()
		delete(s.procs, pid)
	}
	for id, pm := range s.pending { // a run that did not finish
		pm.closeF()
		delete(s.pending, id)
	}
	s.mu.Unlock()
	return s.objs.Close()
}

// Replacements are the walker's maps by their names in any BPF object
// that includes bpf/include/pywalk.h, for ebpf.CollectionOptions's
// MapReplacements: an object loaded after this sensor calls
// py_stack_here() in the thread it wants the stack of, and the stacks it
// takes are decoded here like the sensor's own.
func (s *Sensor) Replacements() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		bpfpy.PystackMapPyConfs:   s.objs.PyConfs,
		bpfpy.PystackMapPyStacks:  s.objs.PyStacks,
		bpfpy.PystackMapPyScratch: s.objs.PyScratch,
		bpfpy.PystackMapPyEvents:  s.objs.PyEvents,
		bpfpy.PystackMapPyLost:    s.objs.PyLost,
		bpfpy.PystackMapPyNatives: s.objs.PyNatives,
	}
}

// StackOf is the decoded stack of a stack id another object's walk
// returned, if it was decoded.
func (s *Sensor) StackOf(id uint64) (record.PyStack, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.byHash[id]
	if !ok {
		return record.PyStack{}, false
	}
	return s.stacks[idx], true
}
