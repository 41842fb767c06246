package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/bpf"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/jit"
)

// Event types of bpf/jit.bpf.c.
const (
	jeFile   = 1
	jeExec   = 2
	jeFork   = 3
	jeUprobe = 4
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
}

// jitDisabled turns the JIT evidence off (for overhead measurements).
var jitDisabled = os.Getenv("COLDTRACE_NO_JIT") == "1"

// uprobeTarget is a compile entry point to probe in every library file
// that matches it, once a traced process opens that file.
type uprobeTarget struct {
	name   string // "LIB:SYMBOL" as reported
	lib    string // a path, or a library name
	symbol string
	err    string // first attach error
	path   string // first file attached
}

// matches says whether a library file (by base name) is lib.
func (u *uprobeTarget) matches(base string) bool {
	lib := u.lib
	if strings.Contains(lib, "/") {
		lib = path.Base(lib)
		return base == lib
	}
	if base == lib || strings.HasPrefix(base, lib+".") {
		return true
	}
	// "nvrtc" matches libnvrtc.so.12 and the wheels' libnvrtc-<hash>.so.12.
	stem := strings.TrimPrefix(strings.TrimSuffix(lib, ".so"), "lib")
	return strings.HasPrefix(base, "lib"+stem+".so") || strings.HasPrefix(base, "lib"+stem+"-")
}

// builtinUprobes are probed whenever a traced process opens their library.
var builtinUprobes = []struct{ lib, symbol string }{
	{"libnvrtc", "nvrtcCompileProgram"},
	{"libcuda", "cuModuleLoadData"},
	{"libcuda", "cuModuleLoadDataEx"},
	{"libcuda", "cuLinkComplete"},
}

// jitEvidence traces path syscalls, execs and compile entry points of the
// tracked threads, and fills the record's JIT section.
type jitEvidence struct {
	env     *runEnv
	objs    bpf.JitObjects
	loaded  bool
	links   []link.Link
	rd      *ringbuf.Reader
	flushed chan struct{}
	done    chan struct{}

	mu sync.Mutex
	// syscallsFrom is when the path-syscall probes were attached (0: not
	// yet), and why.
	syscallsFrom time.Time
	syscallsWhy  string
	col          *jit.Collector
	targets      []*uprobeTarget
	attached     map[string]bool // "dev:ino:symbol"
	warnings     []string
}

func (e *jitEvidence) start(env *runEnv) error {
	if jitDisabled {
		return nil
	}
	e.env = env
	cwd, _ := os.Getwd()
	col, err := jit.NewCollector(jit.Config{CacheDirs: env.opts.CacheDirs, Cwd: cwd, Proc: procFS{}, LookupUser: lookupUser})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPreflight, err)
	}
	e.col = col
	for _, b := range builtinUprobes {
		e.targets = append(e.targets, &uprobeTarget{name: b.lib + ":" + b.symbol, lib: b.lib, symbol: b.symbol})
	}
	for _, v := range env.opts.JITUprobes {
		i := strings.LastIndexByte(v, ':')
		if i <= 0 || i == len(v)-1 {
			return fmt.Errorf("%w: --jit-uprobe %q: want LIB:SYMBOL", ErrPreflight, v)
		}
		e.targets = append(e.targets, &uprobeTarget{name: v, lib: v[:i], symbol: v[i+1:]})
	}
	e.attached = map[string]bool{}

	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{"threads": env.threads, "task_states": env.taskStates}}
	if err := bpf.LoadJitObjects(&e.objs, opts); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return fmt.Errorf("load JIT probes (verifier rejected them): %+v", verr)
		}
		return fmt.Errorf("load JIT probes: %w", err)
	}
	e.loaded = true
	for _, p := range []*ebpf.Program{e.objs.OnJitExec, e.objs.OnJitFork} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attach JIT exec/fork tracepoints: %w", err)
		}
		e.links = append(e.links, l)
	}
	e.rd, err = ringbuf.NewReader(e.objs.JitEvents)
	if err != nil {
		return fmt.Errorf("open JIT ring buffer: %w", err)
	}
	// Libraries named by path are probed now: the command may map them
	// without an open this tracer resolves.
	for i, t := range e.targets {
		if strings.HasPrefix(t.lib, "/") {
			if _, err := os.Stat(t.lib); err != nil {
				t.err = err.Error()
				continue
			}
			e.attach(i, t.lib)
		}
	}
	// Otherwise they attach when a process first uses a framework (see
	// useSeen): the path-syscall tracepoints cost some 0.2 µs per open or
	// stat even when nothing reads their events, a tenth of a program that
	// opens many small files.
	if why := syscallsAtStart(env.opts); why != "" {
		if err := e.attachSyscalls(why); err != nil {
			return err
		}
	}
	e.flushed = make(chan struct{}, 1)
	e.done = make(chan struct{})
	go e.read()
	return nil
}

// When the path-syscall probes attach (Options.JITSyscalls).
const (
	JITSyscallsAuto   = "auto"
	JITSyscallsAlways = "always"
)

// syscallsAtStart says why the path-syscall probes must be attached before
// the command starts, or "" when they can wait for a framework to appear.
func syscallsAtStart(o *Options) string {
	if o.JITSyscalls == JITSyscallsAlways {
		return "--jit-syscalls always"
	}
	if len(o.CacheDirs) > 0 {
		return "--cache-dir"
	}
	if len(o.JITUprobes) > 0 {
		// A library named by --jit-uprobe may be small: its opens, not
		// the core's page-cache records, say when to probe it.
		return "--jit-uprobe"
	}
	if len(o.Command) == 0 {
		return ""
	}
	for _, name := range commandImages(o.Command) {
		if jit.UsesFramework(path.Base(name)) {
			return "the command runs " + path.Base(name)
		}
	}
	return ""
}

// commandImages are the program the command runs and, for a script, its
// interpreter ("#!/usr/bin/env python3" gives env and python3).
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
	f, err := os.Open(exe)
	if err != nil {
		return out
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := io.ReadFull(f, buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	if rest, ok := strings.CutPrefix(line, "#!"); ok {
		out = append(out, strings.Fields(rest)...)
	}
	return out
}

// attachSyscalls attaches the path-syscall probes, once.
func (e *jitEvidence) attachSyscalls(why string) error {
	if !e.syscallsFrom.IsZero() {
		return nil
	}
	e.syscallsFrom, e.syscallsWhy = time.Now(), why
	e.col.PathSyscalls = true
	enter := []*ebpf.Program{nil, e.objs.OnPathEnter1, e.objs.OnPathEnter2, e.objs.OnPathEnter3, e.objs.OnPathEnter4, e.objs.OnPathEnter5}
	for _, sc := range jitSyscalls {
		for _, dir := range []string{"enter", "exit"} {
			prog := enter[sc.nargs]
			if dir == "exit" {
				prog = e.objs.OnPathExit
			}
			l, err := link.Tracepoint("syscalls", "sys_"+dir+"_"+sc.name, prog, nil)
			if err != nil {
				if sc.name == "openat" {
					return fmt.Errorf("attach tracepoint syscalls:sys_%s_%s: %w", dir, sc.name, err)
				}
				e.warnings = append(e.warnings, fmt.Sprintf("jit: no tracepoint syscalls:sys_%s_%s (%v); %s calls are not seen", dir, sc.name, err, sc.name))
				continue
			}
			e.links = append(e.links, l)
		}
	}
	return nil
}

// useSeen attaches the path-syscall probes when a traced process runs or
// maps a file of a framework with a kernel cache. Called with e.mu held.
func (e *jitEvidence) useSeen(pid int32, p string) {
	if !e.syscallsFrom.IsZero() {
		return // attached already, --jit-syscalls always included
	}
	base := path.Base(p)
	if !jit.UsesFramework(base) {
		return
	}
	if err := e.attachSyscalls(fmt.Sprintf("pid %d used %s", pid, base)); err != nil {
		e.warnings = append(e.warnings, fmt.Sprintf("jit: attach the path-syscall probes: %v", err))
	}
}

// fileSeen is told of every file the core probes see a traced process
// read or map for the first time: libraries opened before the path
// syscalls were traced still get their uprobes, and a framework's
// library brings the path-syscall probes in.
func (e *jitEvidence) fileSeen(pid int32, p string) {
	if e.col == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.useSeen(pid, p)
	if strings.Contains(path.Base(p), ".so") {
		e.libraryOpened(p)
	}
}

func (e *jitEvidence) read() {
	defer close(e.done)
	var rec ringbuf.Record
	for {
		// File records do not always wake the reader (see jit.bpf.c):
		// poll for them too.
		e.rd.SetDeadline(time.Now().Add(20 * time.Millisecond))
		err := e.rd.ReadInto(&rec)
		if err != nil {
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if errors.Is(err, ringbuf.ErrFlushed) {
				select {
				case e.flushed <- struct{}{}:
				default:
				}
			}
			continue
		}
		e.mu.Lock()
		e.handle(rec.RawSample)
		e.mu.Unlock()
	}
}

// Field offsets of the ring-buffer records, from the generated types.
var (
	fe bpf.JitFileEvent
	xe bpf.JitExecEvent
	ue bpf.JitUprobeEvent
	ke bpf.JitForkEvent

	fileHdr    = int(unsafe.Offsetof(fe.Path))
	execEnv    = int(unsafe.Offsetof(xe.Env))
	execFile   = int(unsafe.Offsetof(xe.Filename))
	forkBytes  = int(unsafe.Sizeof(ke))
	uprobeSize = int(unsafe.Sizeof(ue))
)

func u32(b []byte, off uintptr) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
func u64(b []byte, off uintptr) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

func cstr(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

func (e *jitEvidence) handle(b []byte) {
	if len(b) < 4 {
		return
	}
	switch u32(b, 0) {
	case jeFile:
		if len(b) < fileHdr {
			return
		}
		op, ok := jit.SyscallOp(int32(u32(b, unsafe.Offsetof(fe.Nr))))
		if !ok {
			return
		}
		l1, l2 := int(u32(b, unsafe.Offsetof(fe.Len1))), int(u32(b, unsafe.Offsetof(fe.Len2)))
		if fileHdr+l1+l2 > len(b) {
			return
		}
		r := jit.RawFile{TS: u64(b, unsafe.Offsetof(fe.Ts)), PID: int32(u32(b, unsafe.Offsetof(fe.Pid))),
			TID: int32(u32(b, unsafe.Offsetof(fe.Tid))), Op: op, CPUNS: u64(b, unsafe.Offsetof(fe.CpuNs)),
			Ret: int64(u64(b, unsafe.Offsetof(fe.Ret))), Dfd: int32(u32(b, unsafe.Offsetof(fe.Dfd1))),
			Dfd2: int32(u32(b, unsafe.Offsetof(fe.Dfd2))), Flags: u32(b, unsafe.Offsetof(fe.Flags)),
			Path: cstr(b[fileHdr : fileHdr+l1]), Path2: cstr(b[fileHdr+l1 : fileHdr+l1+l2])}
		ev, ok := e.col.File(r)
		if ok && op == jit.OpOpen && ev.Errno == 0 && strings.Contains(path.Base(ev.Path), ".so") {
			e.libraryOpened(ev.Path)
		}
	case jeExec:
		if len(b) < execEnv {
			return
		}
		envLen := int(u32(b, unsafe.Offsetof(xe.EnvLen)))
		var env []byte // nil: read /proc instead
		if u32(b, unsafe.Offsetof(xe.EnvTruncated)) == 0 && execEnv+envLen <= len(b) {
			env = b[execEnv : execEnv+envLen]
		}
		file := cstr(b[execFile:min(execFile+len(xe.Filename), len(b))])
		pid := int32(u32(b, unsafe.Offsetof(xe.Pid)))
		e.col.Exec(pid, u32(b, unsafe.Offsetof(xe.Uid)), file, env)
		e.useSeen(pid, file)
	case jeFork:
		if len(b) < forkBytes {
			return
		}
		e.col.Fork(int32(u32(b, unsafe.Offsetof(ke.Pid))), int32(u32(b, unsafe.Offsetof(ke.Ppid))))
	case jeUprobe:
		if len(b) < uprobeSize {
			return
		}
		cookie := u64(b, unsafe.Offsetof(ue.Cookie))
		if cookie >= uint64(len(e.targets)) {
			return
		}
		e.col.Uprobe(e.targets[cookie].name, int32(u32(b, unsafe.Offsetof(ue.Pid))),
			u64(b, unsafe.Offsetof(ue.Start)), u64(b, unsafe.Offsetof(ue.End)), u64(b, unsafe.Offsetof(ue.CpuNs)))
	}
}

// libraryOpened probes the compile entry points of a library a traced
// process opened.
func (e *jitEvidence) libraryOpened(p string) {
	base := path.Base(p)
	for i, t := range e.targets {
		if t.matches(base) {
			e.attach(i, p)
		}
	}
}

// attach probes target i in the file at p (once per file and symbol).
func (e *jitEvidence) attach(i int, p string) {
	t := e.targets[i]
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return
	}
	key := fmt.Sprintf("%d:%d:%s", st.Dev, st.Ino, t.symbol)
	if e.attached[key] {
		return
	}
	e.attached[key] = true
	ex, err := link.OpenExecutable(p)
	if err == nil {
		var in, out link.Link
		in, err = ex.Uprobe(t.symbol, e.objs.OnUprobeEntry, &link.UprobeOptions{Cookie: uint64(i)})
		if err == nil {
			out, err = ex.Uretprobe(t.symbol, e.objs.OnUprobeReturn, &link.UprobeOptions{Cookie: uint64(i)})
			if err != nil {
				in.Close()
			} else {
				e.links = append(e.links, in, out)
				if t.path == "" {
					t.path = p
				}
				return
			}
		}
	}
	if t.err == "" {
		t.err = fmt.Sprintf("%s: %v", p, err)
	}
}

func (e *jitEvidence) finish(rec *record.Record) {
	if e.rd == nil {
		return
	}
	if err := e.rd.Flush(); err == nil {
		select {
		case <-e.flushed:
		case <-time.After(3 * time.Second):
			rec.Warnings = append(rec.Warnings, "jit: the JIT ring buffer did not drain in 3 s")
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var probes []jit.ProbeState
	for _, t := range e.targets {
		if isBuiltin(t) && t.path == "" && t.err == "" {
			continue // its library was never opened: nothing to say
		}
		probes = append(probes, jit.ProbeState{Name: t.name, Path: t.path, Error: t.err})
	}
	j, warns := e.col.Result(jit.ResultInput{StartMono: e.env.startMono(), WallNS: rec.WallNS,
		Processes: rec.Processes, Probes: probes, FS: jit.DefaultFS})
	switch {
	case j == nil:
	case e.syscallsFrom.IsZero():
		j.PathSyscalls = "not traced: no process used a framework with a kernel cache"
	case !e.syscallsFrom.After(rec.Start):
		j.PathSyscalls = "traced from the start (" + e.syscallsWhy + ")"
	default:
		j.PathSyscalls = fmt.Sprintf("traced from +%v, when %s; cache lookups before that are not counted",
			e.syscallsFrom.Sub(rec.Start).Round(time.Millisecond), e.syscallsWhy)
	}
	rec.JIT = j
	rec.Warnings = append(rec.Warnings, e.warnings...)
	rec.Warnings = append(rec.Warnings, warns...)
	rec.Self.EventsSeen += e.col.Seen
	if n := readLostSum(e.objs.Lost, lostRing); n > 0 {
		rec.Lost.RingBuffer += n
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("jit: %d path/exec events lost (ring buffer full): cache counts are lower bounds", n))
	}
}

func isBuiltin(t *uprobeTarget) bool {
	for _, b := range builtinUprobes {
		if t.name == b.lib+":"+b.symbol {
			return true
		}
	}
	return false
}

func readLostSum(m *ebpf.Map, idx uint32) uint64 {
	if m == nil {
		return 0
	}
	var per []uint64
	if err := m.Lookup(idx, &per); err != nil {
		return 0
	}
	var s uint64
	for _, v := range per {
		s += v
	}
	return s
}

func (e *jitEvidence) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = err
		}
	}
	if e.rd != nil {
		keep(e.rd.Close())
		<-e.done
		e.rd = nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.links) - 1; i >= 0; i-- {
		keep(e.links[i].Close())
	}
	e.links = nil
	if e.loaded {
		keep(e.objs.Close())
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
