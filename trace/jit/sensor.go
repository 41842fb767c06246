package jit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/uprobes"
)

// jitSyscalls are the syscalls whose entry and exit tracepoints feed the
// cache classification, with the number of arguments the entry program
// reads. Only openat is required; the others may be missing on some
// kernels.
var jitSyscalls = []struct {
	name  string
	nargs int
}{
	{"openat", 4}, {"openat2", 4}, {"open", 3}, {"creat", 2},
	{"newfstatat", 4}, {"statx", 3}, {"newstat", 1}, {"newlstat", 1},
	{"access", 1}, {"faccessat", 3}, {"faccessat2", 4},
	{"mkdir", 2}, {"mkdirat", 3}, {"rename", 2}, {"renameat", 4}, {"renameat2", 5},
	{"chdir", 1}, {"fchdir", 1},
	// Only their failures are kept: a cache whose renames or unlinks fail
	// (NFS, a cache shared between processes) keeps nothing it compiles.
	{"unlink", 1}, {"unlinkat", 3},
}

// builtinUprobes are probed whenever a traced process opens their library.
var builtinUprobes = []struct{ lib, symbol string }{
	{"libnvrtc", "nvrtcCompileProgram"},
	{"libcuda", "cuModuleLoadData"},
	{"libcuda", "cuModuleLoadDataEx"},
	{"libcuda", "cuLinkComplete"},
	// Numba compiles in process through llvmlite: optimisation passes,
	// then MCJIT's code generation at finalisation (or EmitToMemory when
	// it caches the object code). A Numba function without cache=True
	// leaves no cache lookup, so these calls are its only trace.
	{"libllvmlite", "LLVMPY_RunPassManager"},
	{"libllvmlite", "LLVMPY_RunFunctionPassManager"},
	{"libllvmlite", "LLVMPY_FinalizeObject"},
	{"libllvmlite", "LLVMPY_TargetMachineEmitToMemory"},
}

// Options configure the JIT sensor.
type Options struct {
	// Shared are the scheduler object's maps by name (the tracked set).
	Shared map[string]*ebpf.Map
	// Command is the traced command: when it runs a framework, the
	// path-syscall probes attach before it starts.
	Command []string
	// Env is the command's environment ("K=V"): a framework's cache
	// variable set in it attaches them before it starts too.
	Env []string
	// CacheDirs are extra kernel-cache directories, "NAME=PATH".
	CacheDirs []string
	// Uprobes are extra compile entry points, "LIB:SYMBOL".
	Uprobes []string
	// Syscalls is when the path-syscall probes attach: SyscallsAuto (the
	// default) or SyscallsAlways.
	Syscalls string
	// BTF, when set, is the kernel BTF cache shared by every sensor's
	// load: decoded once per run, not once per object.
	BTF *btf.Cache
	// Actor has the command's rights (actor.Actor.CommandActor): the
	// command's program and the cache trees are read with them, never
	// with root's. The zero Actor reads nothing.
	Actor actor.Actor
	// Scoper installs the compile uprobes in traced processes only; nil:
	// the sensor keeps one of its own, told only by its own events.
	Scoper *uprobes.Scoper
	// Stacks are the Python stack walker's maps by name
	// (pystack.Sensor.Replacements): a Python thread's cache lookups and
	// compile calls take its stack. Nil: no stacks.
	Stacks map[string]*ebpf.Map
	// InternStack and StackPID name a stack id in the record and its
	// process (pystack.Sensor.Intern, PIDOf).
	InternStack func(*record.Record, uint64) int
	StackPID    func(uint64) int32
}

// ErrOption marks an option the sensor cannot use.
var ErrOption = errors.New("bad JIT option")

// Sensor traces path syscalls, execs and compile entry points of the
// tracked threads, and fills the record's JIT section. Its ring buffer is
// read on its own goroutine.
type Sensor struct {
	opts      Options
	startMono uint64
	prunedAt  uint64            // CLOCK_MONOTONIC of the last Prune (Poll)
	objs      bpfjit.JitObjects // its path programs are pathProgs'
	loaded    bool
	// pathProgs loads the path-syscall programs once needed, or in the
	// background from Begin (pathprogs.go); dataSections are the
	// object's, held for them.
	pathProgs    *pathPrograms
	dataSections []*ebpf.Map
	wakes        *wakes
	links        []link.Link
	ring         *probe.Ring

	mu sync.Mutex
	// path says when the path-syscall probes were attached, why, and
	// which processes keep them (pathsyscalls.go).
	path pathUsers
	// pyProcs are the Python processes whose sources were read, and
	// lastTag the latest cache tag in a .pyc name (see python.go).
	pyProcs map[int32]*pyProc
	// pyPendingPIDs are the processes with records in pyPending.
	pyPendingPIDs map[int32]bool
	lastTag       string
	pyPending     []pendingPython
	pyDropped     int
	col           *Collector
	probes        *uprobes.Set
	scoper        *uprobes.Scoper
	ownScoper     bool
	warnings      []string
	quiet         *quietSet // nil: every open reaches user space
}

// New loads the JIT probes and attaches those needed from the start.
func New(opts Options) (*Sensor, error) {
	e := &Sensor{opts: opts}
	if err := e.start(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Sensor) start() error {
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("jit: working directory: %w", err)
	}
	col, err := NewCollector(Config{CacheDirs: e.opts.CacheDirs, Cwd: cwd, Proc: procFS{}, LookupUser: lookupUser})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrOption, err)
	}
	e.col = col
	targets, err := uprobeTargets(e.opts.Uprobes)
	if err != nil {
		return err
	}
	e.scoper = e.opts.Scoper
	if e.scoper == nil {
		e.scoper, e.ownScoper = uprobes.New(uprobes.Options{}), true
	}

	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}, Cache: e.opts.BTF}
	// One tracked set: maps of this object's own would track nothing.
	for _, name := range []string{bpfjit.JitMapThreads, bpfjit.JitMapTaskStates, bpfjit.JitMapTrackedTgids} {
		m := e.opts.Shared[name]
		if m == nil {
			return fmt.Errorf("load JIT probes: the core's %s map is required", name)
		}
		opts.MapReplacements[name] = m
	}
	e.opts.BTF = nil // not held past the load (see evict.New)
	spec, err := bpfjit.LoadJit()
	if err != nil {
		return fmt.Errorf("load JIT probes: %w", err)
	}
	if err := withStacks(spec, opts, e.opts.Stacks); err != nil {
		return fmt.Errorf("load JIT probes: %w", err)
	}
	if err := e.scoper.Prepare(spec, "on_uprobe_entry", "on_uprobe_return"); err != nil {
		return fmt.Errorf("load JIT probes: %w", err)
	}
	hashes, quiet := anywhereHashes(registry.Registry)
	if quiet {
		var arr [quietMaxAnywhere]uint64
		copy(arr[:], hashes)
		if err := spec.Variables[bpfjit.JitVarAnywhereHash].Set(arr); err != nil {
			return fmt.Errorf("load JIT probes: %w", err)
		}
		if err := spec.Variables[bpfjit.JitVarAnywhereCount].Set(uint32(len(hashes))); err != nil {
			return fmt.Errorf("load JIT probes: %w", err)
		}
	}
	var first startObjects
	if err := spec.LoadAndAssign(&first, opts); err != nil {
		return probe.LoadError("JIT probes", err)
	}
	e.objs.JitMaps, e.objs.JitVariables = first.JitMaps, first.JitVariables
	e.objs.OnJitExec, e.objs.OnJitFork = first.OnJitExec, first.OnJitFork
	e.objs.OnUprobeEntry, e.objs.OnUprobeReturn = first.OnUprobeEntry, first.OnUprobeReturn
	e.dataSections = []*ebpf.Map{first.Bss, first.Rodata}
	e.wakes = newWakes(first.KnownExecs, first.LinkedProcs, first.PromptAll)
	e.scoper.OnLinked(e.wakes.setLinked)
	e.pathProgs = newPathPrograms(spec, &first, opts)
	e.loaded = true
	if quiet {
		e.quiet = &quietSet{prefixes: e.objs.RootPrefixes, verdicts: e.objs.ProcVerdicts}
		for _, r := range col.FixedRoots() {
			e.quiet.addRoot(r)
		}
		col.OnRoot = e.quiet.addRoot
	}
	for _, p := range []*ebpf.Program{e.objs.OnJitExec, e.objs.OnJitFork} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attach JIT exec/fork tracepoints: %w", err)
		}
		e.links = append(e.links, l)
	}
	e.probes = &uprobes.Set{Name: "jit", Targets: targets, Entry: e.objs.OnUprobeEntry, Return: e.objs.OnUprobeReturn}
	e.scoper.Add(e.probes)
	// Libraries named by path are known before the command maps them, so
	// its processes are probed from their first call: opened as the
	// command's user (root probes only a library that user could open).
	for i, t := range targets {
		if strings.HasPrefix(t.Lib, "/") {
			if err := addUserLibrary(e.scoper, e.opts.Actor, t.Lib); err != nil {
				e.scoper.Fail(e.probes, i, err.Error())
			}
		}
	}
	// Otherwise they attach when a process first uses a framework (see
	// useSeen): the path-syscall tracepoints cost some 0.2 µs per open or
	// stat even when nothing reads their events, a tenth of a program that
	// opens many small files.
	if why := syscallsAtStart(&e.opts); why != "" {
		if err := e.needSyscalls(0, why); err != nil {
			return err
		}
	}
	// Started last: nothing above needs the lock.
	// File records do not always wake the reader (see jit.bpf.c): it
	// polls for them too, every 50 ms like the other rings (20 ms was 0.3%
	// of a core in a long run; plain opens no longer come this way), and
	// every 400 ms while none come: the first record of a burst wakes it.
	if e.ring, err = probe.StartRing(e.objs.JitEvents, 50*time.Millisecond, 400*time.Millisecond, e.handleLocked); err != nil {
		return err
	}
	return nil
}

// Begin sets the time the run starts at.
func (e *Sensor) Begin(startMono uint64) {
	e.mu.Lock()
	e.startMono = startMono
	e.mu.Unlock()
	if e.pathProgs != nil {
		go func() { _, _ = e.pathProgs.get() }() // its error is the attach's to say
	}
}

// pruneEvery is how often Poll drops the state of exited processes.
const pruneEvery = 10 * time.Second

// Poll is part of the session's sensor interface: JIT evidence is not
// sampled, but every pruneEvery (CLOCK_MONOTONIC now) the state of the
// processes that exited is dropped.
func (e *Sensor) Poll(now uint64, sample *record.Sample) error {
	if e.ownScoper {
		if err := e.scoper.Poll(now, sample); err != nil {
			return err
		}
	}
	if e.col == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checkPathUsers(now)
	if now < e.prunedAt+uint64(pruneEvery) {
		return nil
	}
	e.prunedAt = now
	// A Python process's records wait for the end of the run, which reads
	// its environment and program: it is kept.
	keep := func(pid int32) bool { return e.pyPendingPIDs[pid] || processAlive(pid) }
	e.col.Prune(keep, func(pid int32) {
		delete(e.pyProcs, pid)
		e.quiet.forget(pid)
	})
	return nil
}

// processAlive says whether pid exists (a zombie does, until reaped).
func processAlive(pid int32) bool {
	return unix.Kill(int(pid), 0) != unix.ESRCH
}

// When the path-syscall probes attach (Options.Syscalls).
const (
	SyscallsAuto   = "auto"
	SyscallsAlways = "always"
)

// syscallsAtStart says why the path-syscall probes must be attached before
// the command starts, or "" when they can wait for a framework to appear.
func syscallsAtStart(o *Options) string {
	if o.Syscalls == SyscallsAlways {
		return "--jit-syscalls always"
	}
	if len(o.CacheDirs) > 0 {
		return "--cache-dir"
	}
	if len(o.Uprobes) > 0 {
		// A library the user named is probed at its open, a little
		// before the page cache reports its first mapping (which is
		// what probes the built-in libraries).
		return "--jit-uprobe"
	}
	if v := FrameworkVar(registry.ParseEnvList(append(envAssignments(o.Command), o.Env...))); v != "" {
		return "the command's environment sets " + v
	}
	if len(o.Command) == 0 {
		return ""
	}
	for _, name := range commandImagesWithin(o.Actor, o.Command, imagesDeadline) {
		if UsesFramework(path.Base(name)) {
			return "the command runs " + path.Base(name)
		}
	}
	return ""
}

// envAssignments are the NAME=VALUE operands of an env(1) command line
// (env -u X A=B prog: A=B), which the program then runs with.
func envAssignments(argv []string) []string {
	if len(argv) == 0 || path.Base(argv[0]) != "env" {
		return nil
	}
	var out []string
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-u" || a == "-C" || a == "-S":
			i++
		case strings.HasPrefix(a, "-"):
		case strings.Contains(a, "="):
			out = append(out, a)
		default:
			return out
		}
	}
	return out
}

// imagesDeadline bounds the look at the command's program before the run
// (a program on a hung network file system): past it the run goes on as
// if the program used no framework.
const imagesDeadline = 3 * time.Second

// uprobeTargets are the built-in compile entry points and the user's
// LIB:SYMBOL ones; a target's cookie is its index.
func uprobeTargets(user []string) ([]uprobes.Target, error) {
	var out []uprobes.Target
	for _, b := range builtinUprobes {
		out = append(out, uprobes.Target{Name: b.lib + ":" + b.symbol, Lib: b.lib, Symbol: b.symbol, Cookie: uint64(len(out))})
	}
	for _, v := range user {
		i := strings.LastIndexByte(v, ':')
		if i <= 0 || i == len(v)-1 {
			return nil, fmt.Errorf("%w: --jit-uprobe %q: want LIB:SYMBOL", ErrOption, v)
		}
		out = append(out, uprobes.Target{Name: v, Lib: v[:i], Symbol: v[i+1:], Cookie: uint64(len(out))})
	}
	return out, nil
}

// addUserLibrary opens a library the user named by path with a's rights
// (openAs) and hands it to sc.
func addUserLibrary(sc *uprobes.Scoper, a actor.Actor, p string) error {
	f, err := openAs(a, p)
	if err != nil {
		return err
	}
	return sc.AddFile(f, p)
}

// openAs opens p for reading with a's rights, giving up after
// imagesDeadline (a file opened later is closed). It never blocks on the
// file: a FIFO or device is refused before it is opened for reading.
func openAs(a actor.Actor, p string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	c := make(chan opened, 1)
	go func() {
		var o opened
		o.err = a.Do(func() error {
			var err error
			o.f, err = openRegular(p)
			return err
		})
		c <- o
	}()
	select {
	case o := <-c:
		return o.f, o.err
	case <-time.After(imagesDeadline):
		go func() {
			if o := <-c; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, fmt.Errorf("open %s: no answer within %v", p, imagesDeadline)
	}
}

// openRegular opens p for reading only if it is a regular file: looked at
// with O_PATH first, then opened without blocking and checked again.
func openRegular(p string) (*os.File, error) {
	pathFD, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	var st unix.Stat_t
	err = unix.Fstat(pathFD, &st)
	unix.Close(pathFD)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// commandImagesWithin is commandImages with a's rights, given up after d.
func commandImagesWithin(a actor.Actor, argv []string, d time.Duration) []string {
	done := make(chan []string, 1)
	go func() {
		var out []string
		if err := a.Do(func() error { out = commandImages(argv); return nil }); err != nil {
			out = nil
		}
		done <- out
	}()
	select {
	case out := <-done:
		return out
	case <-time.After(d):
		return nil
	}
}

// commandImages are the program the command runs and, for a script, its
// interpreter ("#!/usr/bin/env python3" gives env and python3). It never
// blocks on the file: a FIFO, device or socket with execute bits is opened
// without waiting for a writer and not read.
func commandImages(argv []string) []string {
	exe, err := exec.LookPath(argv[0])
	if err != nil {
		return []string{argv[0]}
	}
	out := []string{exe}
	// env [-u NAME] [NAME=VALUE]... PROGRAM: the program env runs.
	if path.Base(exe) == "env" {
		for i := 1; i < len(argv); i++ {
			a := argv[i]
			switch {
			case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir":
				i++
			case strings.HasPrefix(a, "-") || strings.Contains(a, "="):
			default:
				return append(out, commandImages(argv[i:])...)
			}
		}
	}
	// Look with O_PATH first: opening a device for reading can have
	// effects of its own. The open that reads is non-blocking and checked
	// again, in case the file was swapped in between.
	pathFD, err := unix.Open(exe, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return out
	}
	var st unix.Stat_t
	err = unix.Fstat(pathFD, &st)
	unix.Close(pathFD)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return out // exec refuses it, and the run says so
	}
	fd, err := unix.Open(exe, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return out
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return out
	}
	buf := make([]byte, 256)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || n < 0 {
		return out
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	if rest, ok := strings.CutPrefix(line, "#!"); ok {
		out = append(out, strings.Fields(rest)...)
	}
	return out
}

// useSeen attaches the path-syscall probes when a traced process runs or
// maps a file of a framework with a kernel cache. Called with e.mu held.
func (e *Sensor) useSeen(pid int32, p string) {
	base := path.Base(p)
	if !UsesFramework(base) {
		return
	}
	if err := e.needSyscalls(pid, fmt.Sprintf("pid %d used %s", pid, base)); err != nil {
		e.warnings = append(e.warnings, fmt.Sprintf("jit: attach the path-syscall probes: %v", err))
	}
}

// envSeen attaches the path-syscall probes when the environment of a
// process that just executed sets a framework's cache variable
// (TRITON_CACHE_DIR): the framework is about to look its cache up. Called
// with e.mu held.
func (e *Sensor) envSeen(pid int32) {
	if v := e.col.frameworkVarOf(pid); v != "" {
		if err := e.needSyscalls(pid, fmt.Sprintf("pid %d has %s set", pid, v)); err != nil {
			e.warnings = append(e.warnings, fmt.Sprintf("jit: attach the path-syscall probes: %v", err))
		}
	}
}

// FileSeen is told of every file the core probes see a traced process
// read, map or write for the first time, and of each process's first
// read of a Python file: libraries opened before the path syscalls were
// traced still get their uprobes, a framework's library or package
// brings the path-syscall probes in, and Python's bytecode cache is told
// from them until then (python.go).
func (e *Sensor) FileSeen(f probe.FileSeen) {
	if e.col == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.useSeen(f.PID, f.Path)
	if f.Kind == probe.SeenPythonRead {
		if pkg := ImportedFramework(f.Path); pkg != "" {
			if err := e.needSyscalls(f.PID, fmt.Sprintf("pid %d imported %s", f.PID, pkg)); err != nil {
				e.warnings = append(e.warnings, fmt.Sprintf("jit: attach the path-syscall probes: %v", err))
			}
		}
	}
	if f.Kind != probe.SeenFirst {
		e.pythonFile(f)
	} else if !e.path.covers(f.TS) {
		e.col.CacheRead(f)
	}
	if strings.Contains(path.Base(f.Path), ".so") {
		// A library's first sight: the process that touched it is about
		// to map it. Its mappings are read, never the path.
		e.scoper.LibrarySeen(f.PID)
	}
}

// handleLocked decodes one record under the lock.
func (e *Sensor) handleLocked(raw []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handle(raw)
}

func (e *Sensor) handle(b []byte) {
	if len(b) < 4 {
		return
	}
	switch bpfjit.JitJitEventKind(binary.LittleEndian.Uint32(b)) {
	case bpfjit.JitJitEventKindJE_FILE:
		ev, ok := probe.Decode[bpfjit.JitFileEvent](b, unsafe.Offsetof(bpfjit.JitFileEvent{}.Path))
		if !ok {
			return
		}
		op, ok := SyscallOp(ev.Nr)
		if !ok {
			return
		}
		l1, l2 := int(ev.Len1), int(ev.Len2)
		if l1+l2 > len(ev.Path) {
			return
		}
		r := RawFile{TS: ev.Ts, PID: int32(ev.Pid), TID: int32(ev.Tid), Op: op, CPUNS: ev.CpuNs, Stack: ev.Stack,
			Ret: ev.Ret, Dfd: ev.Dfd1, Dfd2: ev.Dfd2, Flags: ev.Flags,
			Path: probe.CString(ev.Path[:l1]), Path2: probe.CString(ev.Path[l1 : l1+l2])}
		fe, ok := e.col.File(r)
		if ok && op == OpOpen && fe.Errno == 0 && strings.Contains(path.Base(fe.Path), ".so") {
			// Its mappings are read, never the path it named.
			e.scoper.LibrarySeen(r.PID)
		}
	case bpfjit.JitJitEventKindJE_EXEC:
		// Packed: the program's name, then the environment (bpf/jit).
		dataAt := unsafe.Offsetof(bpfjit.JitExecEvent{}.Data)
		ev, ok := probe.Decode[bpfjit.JitExecEvent](b, dataAt)
		if !ok {
			return
		}
		fl, n := int(ev.FilenameLen), int(ev.EnvLen)
		if fl > len(ev.Data) || int(dataAt)+fl > len(b) {
			return
		}
		var env []byte // nil: read /proc instead
		if ev.EnvTruncated == 0 && int(dataAt)+fl+n <= len(b) && fl+n <= len(ev.Data) {
			env = bytes.Clone(probe.Bytes(ev.Data[fl : fl+n]))
		}
		file := probe.CString(ev.Data[:fl])
		pid := int32(ev.Pid)
		e.col.Exec(pid, ev.Uid, file, env)
		e.useSeen(pid, file)
		e.envSeen(pid)
		key := bpfjit.JitImageKey{Ino: ev.Ino, Dev: ev.Dev, EnvSize: ev.EnvSize}
		if ev.Ino == 0 || e.wakes.knows(key) {
			e.scoper.TrackLater(pid, false)
		} else {
			// Whole names and a whole environment only: a cut one may
			// hide what the next exec of the image would show.
			if fl < int(bpfjit.JitExecLimitEXEC_NAME_MAX) && env != nil && ev.EnvTruncated == 0 && !UsesFramework(path.Base(file)) && e.col.frameworkVarOf(pid) == "" {
				e.wakes.mark(key, bpfjit.JitKnownBitKNOWN_NO_FRAMEWORK)
			}
			var open func() (*os.File, error)
			if a := e.opts.Actor; filepath.IsAbs(file) {
				// Once the process is gone: the name it executed, with
				// its user's rights, taken only if it is the same inode.
				open = func() (*os.File, error) { return openAs(a, file) }
			}
			e.scoper.TrackExecLater(pid, ev.Ino, ev.Dev, open, func() { e.wakes.mark(key, bpfjit.JitKnownBitKNOWN_QUIET_PROGRAM) })
		}
		e.quiet.resolved(int32(ev.Pid), ev.Gen)
	case bpfjit.JitJitEventKindJE_FORK:
		ev, ok := probe.Decode[bpfjit.JitForkEvent](b, unsafe.Sizeof(bpfjit.JitForkEvent{}))
		if !ok {
			return
		}
		e.col.Fork(int32(ev.Pid), int32(ev.Ppid))
		// Its own links: it inherited its parent's breakpoints, which run
		// no program for it.
		e.scoper.TrackForkLater(int32(ev.Pid), int32(ev.Ppid))
		e.path.forked(int32(ev.Pid), int32(ev.Ppid))
		e.quiet.resolved(int32(ev.Pid), ev.Gen)
	case bpfjit.JitJitEventKindJE_UPROBE:
		ev, ok := probe.Decode[bpfjit.JitUprobeEvent](b, unsafe.Sizeof(bpfjit.JitUprobeEvent{}))
		if !ok || ev.Cookie >= uint64(len(e.probes.Targets)) {
			return
		}
		e.col.Uprobe(e.probes.Targets[ev.Cookie].Name, int32(ev.Pid), ev.Start, ev.End, ev.CpuNs, ev.Stack)
	}
}

// rightsFS sizes cache trees with the command's rights: a tree its user
// cannot list is not listed or sized by root into a record.
type rightsFS struct {
	fs FS
	a  actor.Actor
}

func (r rightsFS) Size(p string) (n int64, ok bool) {
	_ = r.a.Do(func() error { n, ok = r.fs.Size(p); return nil })
	return n, ok
}

func (r rightsFS) IsDir(p string) (dir bool) {
	_ = r.a.Do(func() error { dir = r.fs.IsDir(p); return nil })
	return dir
}

func (r rightsFS) Health(p string) (h Health) {
	if err := r.a.Do(func() error { h = r.fs.Health(p); return nil }); err != nil {
		h.Missing = true
	}
	return h
}

// Finish drains the ring buffer and writes the JIT section into rec; it
// needs rec's processes filled in.
func (e *Sensor) Finish(rec *record.Record) error {
	if err := e.ring.Drain(3 * time.Second); err != nil {
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("jit: %v", err))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushPython()
	probes := e.probeStates()
	j, warns := e.col.Result(e.resultInput(rec, probes, rightsFS{fs: DefaultFS, a: e.opts.Actor}))
	if j != nil {
		e.pathSyscallsResult(j, rec.Start, rec.WallNS)
		e.survival(j.Caches)
		otherRoots(j.Caches, registry.Registry, rec.User, rightsFS{fs: DefaultFS, a: e.opts.Actor})
	}
	rec.JIT = j
	rec.Warnings = append(append(rec.Warnings, e.warnings...), e.path.closeWarnings()...)
	if e.quiet != nil && e.quiet.err != nil {
		rec.Warnings = append(rec.Warnings, e.quiet.err.Error())
	}
	rec.Warnings = append(rec.Warnings, warns...)
	rec.Self.EventsSeen += e.col.Seen
	n, err := probe.SumPerCPU(e.objs.Lost, uint32(bpfjit.JitLostKindLOST_RINGBUF))
	if err != nil {
		return fmt.Errorf("jit: read lost counters: %w", err)
	}
	if n > 0 {
		rec.Lost.RingBuffer += n
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("jit: %d path/exec events lost (ring buffer full): cache counts are lower bounds", n))
	}
	return nil
}

// resultInput is the collector's input for rec: its processes, and its
// stacks, which the Python stack sensor (finished or snapshot first, in
// the table's order) has decoded.
func (e *Sensor) resultInput(rec *record.Record, probes []ProbeState, fs FS) ResultInput {
	in := ResultInput{StartMono: e.startMono, WallNS: rec.WallNS, Processes: rec.Processes, Probes: probes, FS: fs}
	if e.opts.InternStack != nil {
		in.Intern = func(id uint64) int { return e.opts.InternStack(rec, id) }
		in.StackPID = e.opts.StackPID
	}
	return in
}

// probeStates says what became of every target; a built-in one whose
// library no traced process mapped says nothing.
func (e *Sensor) probeStates() []ProbeState {
	var out []ProbeState
	states := e.scoper.States(e.probes)
	for i, t := range e.probes.Targets {
		st := states[i]
		if i < len(builtinUprobes) && st.Path == "" && st.Error == "" {
			continue
		}
		ps := ProbeState{Name: t.Name, Path: st.Path, Error: st.Error}
		if st.Processes > 0 {
			ps.Scope = fmt.Sprintf("%s, %d processes", e.scoper.Scope(), st.Processes)
		}
		out = append(out, ps)
	}
	return out
}

// Close stops the reader and releases the probes.
func (e *Sensor) Close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = err
		}
	}
	if e.ring != nil {
		keep(e.ring.Close())
		e.ring = nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closeSyscallLinks()
	e.path.closing.Wait() // before the programs go
	for i := len(e.links) - 1; i >= 0; i-- {
		keep(e.links[i].Close())
	}
	e.links = nil
	if e.ownScoper {
		keep(e.scoper.Close())
		e.ownScoper = false
	}
	if e.loaded {
		keep(e.pathProgs.close())
		keep(e.objs.Close())
		for _, m := range e.dataSections {
			keep(m.Close())
		}
		e.loaded = false
	}
	return first
}

// procFS reads /proc for the JIT collector.
type procFS struct{}

func (procFS) Environ(pid int32) ([]byte, error) {
	return os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/environ")
}

func (procFS) Cwd(pid int32) (string, error) {
	return os.Readlink("/proc/" + strconv.Itoa(int(pid)) + "/cwd")
}

func (procFS) Fd(pid, fd int32) (string, error) {
	return os.Readlink("/proc/" + strconv.Itoa(int(pid)) + "/fd/" + strconv.Itoa(int(fd)))
}

func lookupUser(uid uint32) (string, string) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return "", ""
	}
	return u.Username, u.HomeDir
}
