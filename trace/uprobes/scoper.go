package uprobes

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/procmaps"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// MaxPerfProcesses is how many processes get perf-event uprobes where
// the kernel has no uprobe_multi links: each such probe takes some 0.1 s
// to remove, one after another, at the end of the run.
const MaxPerfProcesses = 32

// rescans is how many times a process's mappings are read after it
// starts, executes or opens a library (1, 3, 7… polls later): a library
// is mapped a little after the event that announces it.
const rescans = 6

// Set is one sensor's targets and programs. Return may be nil.
type Set struct {
	Name    string
	Targets []Target
	Entry   *ebpf.Program
	Return  *ebpf.Program
	// Gate, when set, keeps the set's links out of processes that
	// cannot call its function.
	Gate   *Gate
	states []TargetState
}

// Options configure a Scoper.
type Options struct {
	// LivePIDs lists the traced processes alive now (the scheduler's
	// tracked set): processes that appeared are covered, and the links
	// of those that left are closed, at each Poll. Nil: only Track and
	// Exited tell.
	LivePIDs func() ([]int, error)
}

// Scoper keeps every uprobe link of a run, per traced process.
type Scoper struct {
	opts  Options
	multi bool

	mu    sync.Mutex
	sets  []*Set
	files map[fileKey]*libFile
	order []*libFile // files in the order they became known
	procs map[int32]*proc
	gated map[gateFile]bool // the gates' answers, per file
	// gone are the processes whose links were closed: a late event of
	// theirs (an exec or open handled after the exit) makes none again.
	gone     map[int32]bool
	perf     int // processes with perf-event links
	capped   bool
	warnings []string
	closing  sync.WaitGroup
	closeErr error
	// Attaches and Closes count links made and closed (for the record's
	// self-check and the tests).
	attaches, closes int

	// TrackLater and Exited queue their work for a goroutine of the
	// Scoper's own: they are called by ring-buffer readers, and making a process's
	// links (some 0.1–0.3 ms each) in the reader made a burst of 600
	// forks overflow the ring under load. One FIFO keeps a reused pid's
	// exit before its new start.
	qmu     sync.Mutex
	queue   []queued
	wake    chan struct{}
	done    chan struct{}
	drainMu sync.Mutex
	worker  sync.WaitGroup
	stopped bool
	quick   map[int32]bool // processes with quick scans pending (under mu)
	// onLinked is told when a process gets its first link and when it
	// leaves with links (under mu).
	onLinked func(pid int32, linked bool)
}

// queued is a Track or an Exited waiting for the Scoper's goroutine.
type queued struct {
	pid         int32
	parent      int32 // of a fork (fresh), when its record names it
	fresh, exit bool
	poll        bool // the work of a Poll
	lib         bool // the process is about to map a library
	scan        bool // read its mappings now
	// For an exec: its program's inode and device, a way to open it
	// once the process is gone, and what to call when that program can
	// call no gated set's function (programQuiet).
	ino   uint64
	dev   uint32
	open  func() (*os.File, error)
	quiet func()
}

// quickScans are when a process's mappings are read after it opened a
// library, before the polls' slower rescans: a JIT library is often
// called within milliseconds of its load (Numba compiles at the first
// call after the import), and a link made a poll later misses that.
var quickScans = [...]time.Duration{2 * time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond}

type fileKey struct{ dev, ino uint64 }

// libFile is one library file known to the run, held open.
type libFile struct {
	key  fileKey
	f    *os.File
	ex   *link.Executable
	name string // display path
	base string
	// syms are the function offsets found so far; all is set once every
	// symbol was read (one that is not exported is looked for so).
	syms map[string]uint64
	all  bool
	err  error // reading its symbols failed
}

// offset is the file offset of function sym in lf: through the file's
// hash table when it exports sym, else from every symbol, read once.
func (lf *libFile) offset(sym string) (off uint64, ok bool, err error) {
	if off, ok := lf.syms[sym]; ok || lf.all || lf.err != nil {
		return off, ok, lf.err
	}
	off, ok, err = exportedOffset(lf.f, sym)
	if err == nil && ok {
		if lf.syms == nil {
			lf.syms = map[string]uint64{}
		}
		lf.syms[sym] = off
		return off, true, nil
	}
	lf.syms, lf.err = symbolOffsets(lf.f)
	lf.all = true
	off, ok = lf.syms[sym]
	return off, ok, lf.err
}

// linkKey is one set's links in one library file.
type linkKey struct {
	file fileKey
	set  *Set
}

// proc is one traced process's links.
type proc struct {
	linked map[linkKey]bool
	reach  map[*Set]bool // the gated sets it can call
	links  []link.Link
	perf   bool
	// fromPoll is set for a process first seen in the tracked set, age
	// counts the polls since: its fork event may come a little later,
	// and is no reason to start over.
	fromPoll bool
	age      int
	wait     int // polls until the next rescan
	step     int
	rescans  int
}

// New probes whether the kernel has uprobe_multi links and returns an
// empty Scoper.
func New(opts Options) *Scoper {
	return &Scoper{opts: opts, multi: features.HaveBPFLinkUprobeMulti() == nil,
		files: map[fileKey]*libFile{}, procs: map[int32]*proc{}, gone: map[int32]bool{}}
}

// work applies queued Tracks and Exiteds until Close.
func (s *Scoper) work() {
	defer s.worker.Done()
	for {
		select {
		case <-s.wake:
			s.drain()
		case <-s.done:
			return
		}
	}
}

// enqueue hands q to the Scoper's goroutine without waiting for it.
func (s *Scoper) enqueue(q queued) {
	s.qmu.Lock()
	if s.stopped {
		s.qmu.Unlock()
		return
	}
	if s.wake == nil { // the goroutine starts with the first work
		s.wake, s.done = make(chan struct{}, 1), make(chan struct{})
		s.worker.Add(1)
		go s.work()
	}
	s.queue = append(s.queue, q)
	s.qmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// drain applies what is queued, in order. Everything that reads the
// Scoper's state drains first, so it sees every Track made before it.
func (s *Scoper) drain() {
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	s.qmu.Lock()
	qs := s.queue
	s.queue = nil
	s.qmu.Unlock()
	if len(qs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Library scans of known processes first: a JIT library is called
	// soon after it is mapped, while the links of new processes queued
	// before it (a registration takes tens of milliseconds under load)
	// can wait. A scan never undoes what a queued Track or exit does.
	rest := qs[:0]
	for _, q := range qs {
		if (q.scan || q.lib) && s.procs[q.pid] != nil {
			s.apply(q)
		} else {
			rest = append(rest, q)
		}
	}
	for _, q := range rest {
		s.apply(q)
	}
}

// apply does one queued piece of work, with s.mu held.
func (s *Scoper) apply(q queued) {
	switch {
	case q.poll:
		s.pollLocked()
	case q.scan:
		if p := s.procs[q.pid]; p != nil {
			s.scan(q.pid, p)
		}
		if q.fresh { // the last of the quick scans
			delete(s.quick, q.pid)
		}
	case q.lib:
		s.trackLocked(q.pid, false, nil)
		if s.procs[q.pid] != nil && !s.quick[q.pid] {
			if s.quick == nil {
				s.quick = map[int32]bool{}
			}
			s.quick[q.pid] = true
			for i, d := range quickScans {
				pid, last := q.pid, i == len(quickScans)-1
				time.AfterFunc(d, func() { s.enqueue(queued{pid: pid, scan: true, fresh: last}) })
			}
		}
	case !q.exit:
		fresh, calls := q.fresh, s.inherited(q)
		if fresh && q.parent > 0 && (calls == nil || anyTrue(calls)) && executedAnother(q.pid, q.parent) {
			// A shell loop's child has mostly executed its own program by
			// the time its fork is handled: that program decides, as at
			// an exec, not the parent's.
			fresh, calls = false, nil
		}
		s.trackLocked(q.pid, fresh, calls)
		if q.quiet != nil && s.programQuiet(q.pid, q.ino, q.dev, q.open) {
			q.quiet()
		}
	default:
		if p := s.procs[q.pid]; p != nil {
			s.closeLinks(q.pid, p)
		}
	}
}

// Multi says whether links are uprobe_multi links; the programs must then
// be loaded for them (Prepare).
func (s *Scoper) Multi() bool { return s.multi }

// Scope says how the probes are confined, for the record.
func (s *Scoper) Scope() string {
	if s.multi {
		return "traced processes only (uprobe_multi link per process)"
	}
	return fmt.Sprintf("traced processes only (perf-event uprobe per process, at most %d processes)", MaxPerfProcesses)
}

// Prepare sets the attach type of the named programs of spec to what the
// links need: uprobe_multi programs where the kernel has them.
func (s *Scoper) Prepare(spec *ebpf.CollectionSpec, names ...string) error {
	for _, n := range names {
		p := spec.Programs[n]
		if p == nil {
			return fmt.Errorf("uprobes: no program %s", n)
		}
		if s.multi {
			p.AttachType = ebpf.AttachTraceUprobeMulti
		}
	}
	return nil
}

// AddFile makes a library file known before any process maps it (the
// system's C library, a library the user named and could open): every
// traced process gets links to it as soon as it is tracked, and they take
// effect when it maps the file. The Scoper owns f from then on.
func (s *Scoper) AddFile(f *os.File, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return fmt.Errorf("stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return fmt.Errorf("%s: not a regular file", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := fileKey{st.Dev, st.Ino}
	if s.files[key] != nil {
		f.Close()
		return nil
	}
	s.addFileLocked(key, f, name)
	return nil
}

func (s *Scoper) addFileLocked(key fileKey, f *os.File, name string) *libFile {
	lf := &libFile{key: key, f: f, name: name, base: path.Base(name)}
	s.files[key] = lf
	s.order = append(s.order, lf)
	return lf
}

// Add registers a set of targets; its links are made from the next
// Track or Poll on.
func (s *Scoper) Add(set *Set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set.states = make([]TargetState, len(set.Targets))
	s.sets = append(s.sets, set)
}

// States returns what became of each of set's targets.
func (s *Scoper) States(set *Set) []TargetState {
	s.drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TargetState(nil), set.states...)
}

// Track covers a traced process now: it gets links to every library file
// known, and its mappings are read at the next polls, for the libraries
// it maps next. Called when it is started, forks (fresh: a
// child inherits its parent's breakpoints but not its links), executes,
// or opens a library.
func (s *Scoper) Track(pid int32, fresh bool) {
	s.drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trackLocked(pid, fresh, nil)
}

// TrackProgram is Track for a new process that has not executed its
// program yet (the command, held before its exec): programs, open
// descriptors of what it will execute and of what that may execute in
// the same process at once, tell the gates what it can call; none (they
// could not be opened) counts as a program that calls every gated
// function. The programs are read before the lock is taken, for at most
// programReadTimeout (a program on a hung file system counts as one that
// calls them). TrackProgram closes programs.
func (s *Scoper) TrackProgram(pid int32, programs []*os.File) {
	s.mu.Lock()
	gates := s.gatesLocked()
	s.mu.Unlock()
	calls := readPrograms(gates, programs, programReadTimeout)
	s.drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trackLocked(pid, true, calls)
}

// TrackExisting is Track for a process that ran before the trace
// (coldtrace attach): its libraries are mapped already, so they are read
// and probed now, before the attach says it is tracking. Left to the
// next poll, they were made 150-210 ms after it beside two busy loops
// (13-40 ms a link), a margin a busier machine eats up: a compile that
// began meanwhile was seen only from the link on (a Numba compile of
// some 50 ms seen as 13 ms in CI).
func (s *Scoper) TrackExisting(pid int32) {
	s.drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trackLocked(pid, false, nil)
	if p := s.procs[pid]; p != nil {
		s.scan(pid, p)
	}
}

// LibrarySeen is TrackLater for a process that opened a library: its
// mappings are read a few milliseconds later, not only at the polls.
func (s *Scoper) LibrarySeen(pid int32) {
	s.enqueue(queued{pid: pid, lib: true})
}

// TrackLater is Track for a ring-buffer reader: the links are made by
// the Scoper's own goroutine, in order, a moment later, so a burst of
// forks never holds up the reader of the ring that announces them.
func (s *Scoper) TrackLater(pid int32, fresh bool) {
	s.enqueue(queued{pid: pid, fresh: fresh})
}

// TrackExecLater is TrackLater for a process that executed the program of
// inode ino on device dev (the kernel's numbering): quiet is then called,
// from the Scoper's goroutine, if that program can call none of the gated
// sets' functions (so its next execs need no links, whatever the process
// could call before). open, when not nil, opens the program should the
// process be gone by then; a file of another inode is not taken.
func (s *Scoper) TrackExecLater(pid int32, ino uint64, dev uint32, open func() (*os.File, error), quiet func()) {
	s.enqueue(queued{pid: pid, ino: ino, dev: dev, open: open, quiet: quiet})
}

// OnLinked sets fn to be told, under the Scoper's lock, when a process
// gets its first link (true) and when one with links leaves (false).
func (s *Scoper) OnLinked(fn func(pid int32, linked bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onLinked = fn
}

// TrackForkLater is TrackLater for a process announced by its fork from
// parent.
func (s *Scoper) TrackForkLater(pid, parent int32) {
	s.enqueue(queued{pid: pid, parent: parent, fresh: true})
}

// inherited is what a forked child can call: what its parent could, for
// a parent the Scoper knows (the child runs the parent's program, with
// its mappings, until it executes another, and its exec is handled as
// any process's). nil for any other Track: a child of an unknown parent
// counts as one that calls every gated function.
func (s *Scoper) inherited(q queued) map[*Gate]bool {
	if !q.fresh || q.parent <= 0 {
		return nil
	}
	pp := s.procs[q.parent]
	if pp == nil {
		return nil
	}
	calls := map[*Gate]bool{}
	for _, set := range s.sets {
		if set.Gate != nil && pp.reach[set] {
			calls[set.Gate] = true
		}
	}
	return calls
}

// anyTrue says whether some gate's answer in calls is yes.
func anyTrue(calls map[*Gate]bool) bool {
	for _, v := range calls {
		if v {
			return true
		}
	}
	return false
}

// executedAnother says whether pid runs a program other than parent's
// (both alive): it executed its own since the fork.
func executedAnother(pid, parent int32) bool {
	var a, b unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(int(pid))+"/exe", &a) != nil ||
		unix.Stat("/proc/"+strconv.Itoa(int(parent))+"/exe", &b) != nil {
		return false
	}
	return a.Dev != b.Dev || a.Ino != b.Ino
}

// trackLocked covers pid with the links of the files known now. A new
// process gets the gated sets' links when calls says so (the gates'
// answers for the programs it will run), when calls is nil and it is
// announced by its fork (fresh: it executes its own program a moment
// later, sooner than its exec is handled and a link made, and the link
// follows it through the exec), or else when the program it runs now
// can call them. A known process gets them when it executes a program
// that can.
func (s *Scoper) trackLocked(pid int32, fresh bool, calls map[*Gate]bool) {
	if len(s.sets) == 0 || pid <= 0 {
		return
	}
	p := s.procs[pid]
	switch {
	case p != nil && fresh && p.fromPoll && p.age <= 2:
		// the fork event of a process the tracked set showed first
	case p != nil && fresh:
		s.closeLinks(pid, p) // a reused pid: those links were another process's
		p = nil
	case p == nil && !fresh && s.gone[pid]:
		return // it exited; this event was handled late
	}
	if p == nil {
		delete(s.gone, pid)
		// Most children of a build or a shell loop have exited and been
		// reaped by the time their fork or exec record is handled (1,954
		// of a 2,000-process fork/exec storm): a signal-0 kill tells so
		// for far less than the links' attach, which fails only after
		// resolving the library's path.
		if errors.Is(unix.Kill(int(pid), 0), unix.ESRCH) {
			s.gone[pid] = true
			return
		}
		p = &proc{linked: map[linkKey]bool{}, reach: map[*Set]bool{}}
		s.procs[pid] = p
		switch {
		case calls != nil:
			for _, set := range s.sets {
				if set.Gate != nil && calls[set.Gate] {
					p.reach[set] = true
				}
			}
		case fresh:
			s.reachAll(p)
		default:
			s.reachProgram(pid, p)
		}
		for _, lf := range s.order {
			s.attachFile(pid, p, lf)
		}
	} else if !fresh && s.reachProgram(pid, p) {
		for _, lf := range s.order {
			s.attachFile(pid, p, lf)
		}
	}
	// Read at the next poll, not now: a library is mapped a little after
	// the event that announces it, and a process that opens hundreds of
	// them (an import of a large Python package) is read once a poll.
	p.step, p.wait, p.rescans = 1, 1, rescans
}

// Exited closes a process's links.
func (s *Scoper) Exited(pid int32) {
	s.enqueue(queued{pid: pid, exit: true})
}

// scan reads pid's mappings: a library file not known yet that some
// target matches is opened through the mapping and attached in every
// traced process; a known one in pid if it is not yet.
func (s *Scoper) scan(pid int32, p *proc) {
	maps, err := procmaps.Read(int(pid))
	if err != nil {
		return // it exited: Poll closes its links
	}
	if s.reachMapped(pid, p, maps) {
		for _, lf := range s.order {
			s.attachFile(pid, p, lf)
		}
	}
	for _, m := range maps {
		if !m.Exec() {
			continue
		}
		key := fileKey{uint64(unix.Mkdev(m.Major, m.Minor)), m.Inode}
		if lf := s.files[key]; lf != nil {
			s.attachFile(pid, p, lf)
			continue
		}
		if !s.wanted(path.Base(m.Path)) {
			continue
		}
		f, err := procmaps.Open(int(pid), m)
		if err != nil {
			continue // unmapped meanwhile; a later scan sees what replaced it
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			continue
		}
		key = fileKey{st.Dev, st.Ino}
		lf := s.addFileLocked(key, f, m.Path)
		// The process that mapped it first: it is about to call it.
		s.attachFile(pid, p, lf)
		for other, op := range s.procs {
			if other != pid {
				s.attachFile(other, op, lf)
			}
		}
	}
}

// wanted says whether some target matches a library's base name.
func (s *Scoper) wanted(base string) bool {
	for _, set := range s.sets {
		for _, t := range set.Targets {
			if t.Matches(base) {
				return true
			}
		}
	}
	return false
}

// plan is one set's probes in one file.
type plan struct {
	idx            []int
	addrs, cookies []uint64
}

// planFor resolves set's targets that match lf, reading lf's symbols
// from its descriptor (libFile.offset). A target whose symbol lf lacks
// gets an error.
func (s *Scoper) planFor(set *Set, lf *libFile) plan {
	var pl plan
	for i, t := range set.Targets {
		if !t.Matches(lf.base) {
			continue
		}
		off, ok, err := lf.offset(t.Symbol)
		if err != nil {
			s.fail(set, i, fmt.Sprintf("%s: %v", lf.name, err))
			continue
		}
		if !ok {
			s.fail(set, i, fmt.Sprintf("%s: no function %s", lf.name, t.Symbol))
			continue
		}
		pl.idx = append(pl.idx, i)
		pl.addrs = append(pl.addrs, off)
		pl.cookies = append(pl.cookies, t.Cookie)
	}
	return pl
}

// Fail records why target i of set could not be probed, unless an
// earlier failure was recorded.
func (s *Scoper) Fail(set *Set, i int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail(set, i, msg)
}

func (s *Scoper) fail(set *Set, i int, msg string) {
	if set.states[i].Error == "" {
		set.states[i].Error = msg
	}
}

// attachFile links every set's probes in lf for pid, once, a gated set's
// only once pid can call it.
func (s *Scoper) attachFile(pid int32, p *proc, lf *libFile) {
	for _, set := range s.sets {
		k := linkKey{lf.key, set}
		if p.linked[k] || (set.Gate != nil && !p.reach[set]) {
			continue
		}
		p.linked[k] = true
		pl := s.planFor(set, lf)
		if len(pl.idx) == 0 {
			continue
		}
		if !s.multi && !p.perf {
			if s.perf >= MaxPerfProcesses {
				if !s.capped {
					s.capped = true
					s.warnings = append(s.warnings, fmt.Sprintf(
						"uprobes: this kernel has no uprobe_multi links; probes were attached in the first %d traced processes only (pid %d and later ones are not probed)", MaxPerfProcesses, pid))
				}
				return
			}
			p.perf = true
			s.perf++
		}
		if err := s.link(pid, p, lf, set, pl); err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
				return // it exited before its event was handled
			}
			for _, i := range pl.idx {
				s.fail(set, i, fmt.Sprintf("%s (pid %d): %v", lf.name, pid, err))
			}
			continue
		}
		for _, i := range pl.idx {
			st := &set.states[i]
			if st.Path == "" {
				st.Path = lf.name
			}
			st.Processes++
		}
	}
}

// link attaches one set's entry and return programs for pid in lf.
func (s *Scoper) link(pid int32, p *proc, lf *libFile, set *Set, pl plan) error {
	if lf.ex == nil {
		// The descriptor's magic link: the kernel resolves it to the
		// inode held, whatever path the process named.
		ex, err := link.OpenExecutable("/proc/self/fd/" + strconv.Itoa(int(lf.f.Fd())))
		if err != nil {
			return err
		}
		lf.ex = ex
	}
	var made []link.Link
	undo := func(err error) error {
		for _, l := range made {
			_ = l.Close()
		}
		return err
	}
	for _, ret := range []bool{false, true} {
		prog := set.Entry
		if ret {
			prog = set.Return
		}
		if prog == nil {
			continue
		}
		if s.multi {
			opts := &link.UprobeMultiOptions{Addresses: pl.addrs, Cookies: pl.cookies, PID: uint32(pid)}
			attach := lf.ex.UprobeMulti
			if ret {
				attach = lf.ex.UretprobeMulti
			}
			l, err := attach(nil, prog, opts)
			if err != nil {
				return undo(err)
			}
			made = append(made, l)
			continue
		}
		for k, i := range pl.idx {
			opts := &link.UprobeOptions{Address: pl.addrs[k], Cookie: pl.cookies[k], PID: int(pid)}
			attach := lf.ex.Uprobe
			if ret {
				attach = lf.ex.Uretprobe
			}
			l, err := attach(set.Targets[i].Symbol, prog, opts)
			if err != nil {
				return undo(err)
			}
			made = append(made, l)
		}
	}
	first := len(p.links) == 0 && len(made) > 0
	p.links = append(p.links, made...)
	s.attaches += len(made)
	if first && s.onLinked != nil {
		s.onLinked(pid, true)
	}
	return nil
}

// closeLinks closes a process's links in the background (each close
// waits for the kernel to take the breakpoints out) and forgets it.
func (s *Scoper) closeLinks(pid int32, p *proc) {
	delete(s.procs, pid)
	s.gone[pid] = true
	s.countUnprobed(p)
	if len(p.links) == 0 {
		return
	}
	if s.onLinked != nil {
		s.onLinked(pid, false)
	}
	s.closes += len(p.links)
	s.closing.Add(1)
	go func(ls []link.Link) {
		defer s.closing.Done()
		err := probe.CloseLinks(ls)
		if err != nil {
			s.mu.Lock()
			if s.closeErr == nil {
				s.closeErr = err
			}
			s.mu.Unlock()
		}
	}(p.links)
}

// countUnprobed counts p, leaving, in each gated set it could not call.
func (s *Scoper) countUnprobed(p *proc) {
	for _, set := range s.sets {
		if set.Gate == nil || p.reach[set] {
			continue
		}
		for i := range set.states {
			set.states[i].Unprobed++
		}
	}
}

// Begin is part of the session's sensor interface.
func (s *Scoper) Begin(uint64) {}

// Poll covers the traced processes that appeared since the last poll,
// closes the links of those that left, and reads again the mappings of
// those that started or opened a library lately.
func (s *Scoper) Poll(uint64, *record.Sample) error {
	// The Scoper's goroutine does it: registering a uprobe walks every
	// mapping of the library on the machine (libc: every process), tens
	// of milliseconds a link under load, which in the session's poll
	// loop stretched 10 ms polls to 40–110 ms.
	s.enqueue(queued{poll: true})
	return nil
}

// pollLocked is Poll's work, with s.mu held.
func (s *Scoper) pollLocked() {
	if len(s.sets) == 0 {
		return
	}
	var live map[int32]bool
	if s.opts.LivePIDs != nil {
		pids, err := s.opts.LivePIDs()
		if err != nil {
			s.warnOnce("uprobes: the tracked set could not be read: " + err.Error())
			return
		}
		live = make(map[int32]bool, len(pids))
		for _, pid := range pids {
			live[int32(pid)] = true
		}
	}
	for pid, p := range s.procs {
		if live != nil && !live[pid] {
			s.closeLinks(pid, p)
			continue
		}
		p.age++
		if p.rescans == 0 {
			continue
		}
		if p.wait--; p.wait <= 0 {
			p.step *= 2
			p.wait, p.rescans = p.step, p.rescans-1
			s.scan(pid, p)
		}
	}
	for pid := range live {
		if s.procs[pid] == nil {
			// Its fork not handled yet: what it runs now decides, and its
			// exec record, if it executes another program, again.
			s.trackLocked(pid, false, nil)
			if p := s.procs[pid]; p != nil {
				p.fromPoll = true
			}
		}
	}
}

// warnOnce adds msg to the record's warnings once.
func (s *Scoper) warnOnce(msg string) {
	if !slices.Contains(s.warnings, msg) {
		s.warnings = append(s.warnings, msg)
	}
}

// Finish adds the Scoper's warnings to rec.
func (s *Scoper) Finish(rec *record.Record) error {
	s.drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.Warnings = append(rec.Warnings, s.warnings...)
	return nil
}

// Counts returns how many links were made and closed so far.
func (s *Scoper) Counts() (attached, closed int) {
	s.drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attaches, s.closes
}

// Close closes every link, all at once, and the library files.
func (s *Scoper) Close() error {
	s.qmu.Lock()
	done := s.done
	if s.stopped {
		done = nil
	}
	s.stopped = true
	s.qmu.Unlock()
	if done != nil {
		close(done)
		s.worker.Wait()
	}
	s.drain()
	s.mu.Lock()
	var all []link.Link
	for pid, p := range s.procs {
		all = append(all, p.links...)
		s.closes += len(p.links)
		s.countUnprobed(p)
		delete(s.procs, pid)
	}
	files := s.order
	s.order, s.files = nil, map[fileKey]*libFile{}
	s.mu.Unlock()
	err := probe.CloseLinks(all)
	s.closing.Wait()
	for _, lf := range files {
		lf.f.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.closeErr)
}
