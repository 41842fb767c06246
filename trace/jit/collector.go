package jit

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"path"
	"sort"
	"strings"
	"unicode"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

// AtFDCWD is the dirfd meaning "relative to the cwd".
const AtFDCWD = -100

// ProcFS reads what the events do not carry from /proc; every call may
// fail for a process that has already exited.
type ProcFS interface {
	Environ(pid int32) ([]byte, error)
	Cwd(pid int32) (string, error)
	Fd(pid, fd int32) (string, error)
}

// FS answers questions about the cache directories at the end of a run.
type FS interface {
	// Size is the size of a file, or the total of a directory's files.
	Size(p string) (int64, bool)
	// IsDir says p is a directory: not an entry of a cache whose every
	// file is one (EntryDepth 0).
	IsDir(p string) bool
	// Health describes a cache root.
	Health(root string) Health
}

// Health is the state of a cache root at the end of a run.
type Health struct {
	FS       string // filesystem type name
	Volatile bool   // lost on reboot (tmpfs, ramfs)
	// ContainerLayer: an overlay filesystem, a container's writable
	// layer, lost when the container is replaced.
	ContainerLayer bool
	Missing        bool
	Size           int64
	Files          int64
	Capped         bool // the walk stopped early: Size is a lower bound
	// Unreadable: the root could not be listed with the rights it was
	// looked at with (the command's user); Size and Files say nothing.
	Unreadable bool
}

// Config sets up a Collector.
type Config struct {
	// Specs is the registry to resolve; nil means Registry.
	Specs []registry.Spec
	// CacheDirs are --cache-dir NAME=PATH values; relative paths are
	// taken relative to Cwd.
	CacheDirs []string
	Cwd       string
	// Compilers are compiler names beside the shared compiler list;
	// ArgCompilers replace DefaultArgCompilers when not nil.
	Compilers    []string
	ArgCompilers []registry.ArgCompiler
	Proc         ProcFS
	// LookupUser gives a uid's passwd name and home, for ~ and {user}
	// when the environment lacks HOME or USER.
	LookupUser func(uid uint32) (name, home string)
	// MaxEvents bounds the cache events kept (0: 4 million).
	MaxEvents int
}

// RawFile is one path syscall as the probes report it: paths not yet
// resolved, the syscall's result.
type RawFile struct {
	TS       uint64
	PID, TID int32
	Op       Op
	Dfd      int32
	Path     string
	Dfd2     int32
	Path2    string
	Flags    uint32
	Ret      int64
	CPUNS    uint64
	Stack    uint64 // the thread's Python stack id, 0: none
}

type proc struct {
	exe string // the file of its latest exec, as executed
	cwd string
	fds map[int32]string
	env registry.Env
	uid uint32
	// envSum is a hash of the raw environment env was parsed from: an
	// exec that keeps it (the usual case) needs no new parse or resolve.
	envSum uint64
}

type uprobeAcc struct {
	calls   uint64
	total   int64
	cpu     int64
	windows []record.JITWindow // start/end still CLOCK_MONOTONIC
	stacks  []uint64           // each window's Python stack id (0: none)
}

// envSeed keys the environment hashes of one process's collectors.
var envSeed = maphash.MakeSeed()

// Collector gathers the events of one run. It is driven by one goroutine.
type Collector struct {
	cfg      Config
	specs    []registry.Spec
	matcher  *Matcher
	procs    map[int32]*proc
	users    map[uint32][2]string
	roots    *rootSet
	events   []FileEvent
	uprobes  map[string]*uprobeAcc
	used     map[string]map[int32]bool // by spec: processes that opened one of its Uses
	dropped  uint64
	warnings []string
	// PathSyscalls is set once path syscalls are traced: from then on an
	// exec reads the process's cwd again.
	PathSyscalls bool
	// Seen counts every event handed to the collector.
	Seen uint64
	// pySources are the source reads of Python processes that write
	// bytecode, by pid and the .pyc each maps to: a lookup once that .pyc
	// is written (PythonFile).
	pySources map[int32]map[string]FileEvent
	// OnRoot, when set, is told of each fixed root (not in-tree) as it is
	// added, before the event that brought it returns.
	OnRoot func(path string)
	// gone are the processes Prune found exited, to drop at its next call.
	gone map[int32]bool
	// envs holds one parsed environment per distinct block (by hash),
	// shared by every process that execs with it: a build's compilers
	// exec with the same few environments thousands of times, and a
	// burst of 1,500 compiles held 10 MiB of copies until they were
	// pruned. Prune drops the ones no process holds.
	envs map[uint64]registry.Env
	// fwVars are frameworkVars(Registry), parsed once: each exec asks
	// (a fork/exec storm spent 8 µs an exec taking the paths apart).
	fwVars []string
	// usesOf memoizes noteUse's matches by program base name (the names
	// a run executes are few; it is cleared past usesOfMax).
	usesOf map[string][]string
}

const usesOfMax = 4096

// Prune drops the state of processes that exited: a run that starts a
// compiler every second kept an environment per exec, some 10 MiB an hour.
// A process is dropped at the second call that finds it gone (keep
// false), so the events it sent before its exit have been read by then;
// onDrop, when set, is called first. It returns how many were dropped.
func (c *Collector) Prune(keep func(pid int32) bool, onDrop func(pid int32)) int {
	dropped := 0
	for pid := range c.gone {
		if _, ok := c.procs[pid]; !ok || keep(pid) {
			delete(c.gone, pid)
			continue
		}
		if onDrop != nil {
			onDrop(pid)
		}
		delete(c.procs, pid)
		delete(c.pySources, pid)
		delete(c.gone, pid)
		dropped++
	}
	if dropped > 0 && len(c.envs) > 0 {
		held := make(map[uint64]bool, len(c.envs))
		for _, p := range c.procs {
			held[p.envSum] = true
		}
		for sum := range c.envs {
			if !held[sum] {
				delete(c.envs, sum)
			}
		}
	}
	for pid := range c.procs {
		if !c.gone[pid] && !keep(pid) {
			if c.gone == nil {
				c.gone = map[int32]bool{}
			}
			c.gone[pid] = true
		}
	}
	return dropped
}

// FixedRoots are the paths of the fixed roots known so far.
func (c *Collector) FixedRoots() []string {
	out := make([]string, 0, len(c.roots.fixed))
	for _, st := range c.roots.fixed {
		out = append(out, st.root.Path)
	}
	return out
}

// addRoot registers r and tells OnRoot of a new fixed root.
func (c *Collector) addRoot(r registry.Root) *rootState {
	st, added := c.roots.add(r)
	if added && r.Anywhere == "" && c.OnRoot != nil {
		c.OnRoot(r.Path)
	}
	return st
}

// NewCollector returns a collector with the --cache-dir roots in place.
func NewCollector(cfg Config) (*Collector, error) {
	c := &Collector{cfg: cfg, specs: cfg.Specs, procs: map[int32]*proc{}, users: map[uint32][2]string{},
		roots: newRootSet(), uprobes: map[string]*uprobeAcc{}, used: map[string]map[int32]bool{},
		fwVars: frameworkVars(registry.Registry)}
	if c.specs == nil {
		c.specs = registry.Registry
	}
	if c.cfg.MaxEvents <= 0 {
		c.cfg.MaxEvents = 4 << 20
	}
	c.matcher = NewMatcher(cfg.Compilers, cfg.ArgCompilers)
	for _, v := range cfg.CacheDirs {
		name, dir, ok := registry.ParseCacheDir(v, cfg.Cwd)
		if !ok {
			return nil, fmt.Errorf("--cache-dir %q: want NAME=PATH", v)
		}
		s := registry.UserSpec(name, dir)
		c.addRoot(registry.Root{Spec: &s, Path: dir, Via: "--cache-dir"})
	}
	return c, nil
}

func (c *Collector) identity(p *proc) registry.Identity {
	id := registry.Identity{UID: p.uid, Cwd: p.cwd}
	if c.cfg.LookupUser != nil {
		u, ok := c.users[p.uid]
		if !ok {
			n, h := c.cfg.LookupUser(p.uid)
			u = [2]string{n, h}
			c.users[p.uid] = u
		}
		id.User, id.Home = u[0], u[1]
	}
	return id
}

// proc returns the state of pid, building it from /proc when the run
// has not shown where it came from.
func (c *Collector) proc(pid int32) *proc {
	p := c.procs[pid]
	if p != nil {
		return p
	}
	p = &proc{fds: map[int32]string{}}
	c.procs[pid] = p
	if c.cfg.Proc != nil {
		if cwd, err := c.cfg.Proc.Cwd(pid); err == nil {
			p.cwd = cwd
		}
		if b, err := c.cfg.Proc.Environ(pid); err == nil {
			p.env = registry.ParseEnviron(b)
			c.resolve(pid, p)
		}
	}
	return p
}

// resolve adds the roots the environment of process pid gives.
func (c *Collector) resolve(pid int32, p *proc) {
	for _, r := range registry.Resolve(c.specs, p.env, c.identity(p)) {
		st := c.addRoot(r)
		for _, sw := range r.Spec.SwitchesOn(p.env) {
			if st.switchPIDs == nil {
				st.switchPIDs = map[string]map[int32]bool{}
			}
			if !containsSwitch(st.switches, sw.Env) {
				st.switches = append(st.switches, sw)
				st.switchPIDs[sw.Env] = map[int32]bool{}
			}
			st.switchPIDs[sw.Env][pid] = true
		}
		if l := r.Spec.LimitIn(p.env); l > 0 {
			st.limit = l
		}
	}
}

func containsSwitch(list []registry.Switch, env string) bool {
	for _, s := range list {
		if s.Env == env {
			return true
		}
	}
	return false
}

// Fork records a new process: it inherits its parent's cwd, open files
// and environment.
func (c *Collector) Fork(pid, ppid int32) {
	c.Seen++
	parent := c.procs[ppid]
	if parent == nil {
		c.proc(pid)
		return
	}
	p := &proc{exe: parent.exe, cwd: parent.cwd, env: parent.env, uid: parent.uid, envSum: parent.envSum, fds: make(map[int32]string, len(parent.fds))}
	for k, v := range parent.fds {
		p.fds[k] = v
	}
	c.procs[pid] = p
}

// Exec records an exec of filename: the new image's environment (env nil
// when the probe could not read it all: /proc is read instead) decides
// its roots.
func (c *Collector) Exec(pid int32, uid uint32, filename string, env []byte) {
	c.Seen++
	c.noteUse(pid, filename)
	p := c.procs[pid]
	if p == nil {
		p = &proc{fds: map[int32]string{}}
		c.procs[pid] = p
	}
	oldCwd := p.cwd
	p.exe = filename
	if c.cfg.Proc != nil {
		// exec keeps the cwd: what the process inherited (or read when it
		// was first seen) still holds, and reading /proc on every exec of
		// a fork/exec storm slows the storm down. Only relative paths of
		// traced path syscalls need it exact.
		if p.cwd == "" || c.PathSyscalls {
			if cwd, err := c.cfg.Proc.Cwd(pid); err == nil {
				p.cwd = cwd
			}
		}
		if env == nil {
			if b, err := c.cfg.Proc.Environ(pid); err == nil {
				env = b
			}
		}
	}
	if env != nil {
		sum := maphash.Bytes(envSeed, env)
		if sum == p.envSum && uid == p.uid && p.cwd == oldCwd && p.env != nil {
			return // the same process identity: its roots are resolved
		}
		p.env, p.envSum = c.internEnv(sum, env), sum
	}
	p.uid = uid
	c.resolve(pid, p)
}

// internEnv is the parsed environment of block env, whose hash is sum;
// the map returned is shared and must not be written.
func (c *Collector) internEnv(sum uint64, env []byte) registry.Env {
	if e, ok := c.envs[sum]; ok {
		return e
	}
	e := registry.ParseEnviron(env)
	if c.envs == nil {
		c.envs = map[uint64]registry.Env{}
	}
	c.envs[sum] = e
	return e
}

func (c *Collector) fdPath(pid int32, p *proc, fd int32) string {
	if s, ok := p.fds[fd]; ok {
		return s
	}
	if c.cfg.Proc != nil {
		if s, err := c.cfg.Proc.Fd(pid, fd); err == nil && strings.HasPrefix(s, "/") {
			p.fds[fd] = s
			return s
		}
	}
	return ""
}

// abs makes a syscall's path absolute; "" when it cannot be.
func (c *Collector) abs(pid int32, p *proc, dfd int32, name string) string {
	if name == "" {
		return ""
	}
	if strings.HasPrefix(name, "/") {
		return path.Clean(name)
	}
	var base string
	if dfd == AtFDCWD {
		base = p.cwd
	} else {
		base = c.fdPath(pid, p, dfd)
	}
	if base == "" {
		return ""
	}
	return path.Join(base, name)
}

// File handles one path syscall. It returns the event with absolute
// paths, and whether it could be resolved.
func (c *Collector) File(r RawFile) (FileEvent, bool) {
	c.Seen++
	p := c.proc(r.PID)
	ev := FileEvent{TS: r.TS, PID: r.PID, TID: r.TID, Op: r.Op, Flags: r.Flags, CPUNS: r.CPUNS, Stack: r.Stack}
	if r.Ret < 0 {
		ev.Errno = int(-r.Ret)
	}
	switch r.Op {
	case OpChdir:
		if r.Ret != 0 {
			return ev, false
		}
		var d string
		if r.Path != "" {
			d = c.abs(r.PID, p, AtFDCWD, r.Path)
		} else {
			d = c.fdPath(r.PID, p, r.Dfd)
		}
		if d != "" {
			p.cwd = d
		}
		ev.Path = d
		return ev, d != ""
	case OpRename:
		ev.Path = c.abs(r.PID, p, r.Dfd, r.Path)
		ev.NewPath = c.abs(r.PID, p, r.Dfd2, r.Path2)
		if ev.NewPath == "" {
			return ev, false
		}
	default:
		ev.Path = c.abs(r.PID, p, r.Dfd, r.Path)
		if ev.Path == "" {
			return ev, false
		}
	}
	if r.Op == OpOpen && r.Ret >= 0 {
		p.fds[int32(r.Ret)] = ev.Path
		if strings.Contains(path.Base(ev.Path), ".so") {
			c.noteUse(r.PID, ev.Path)
		}
	}
	c.observe(ev)
	return ev, true
}

// UsesFramework says whether a file with this base name (a program or a
// library) belongs to a framework in the Registry whose cache lookups
// need the path syscalls traced: not Python itself, whose bytecode cache
// the page-cache probes tell (PageCacheEvidence), nor those whose rules
// other sources see (SeenWithoutPathSyscalls).
func UsesFramework(base string) bool {
	for i := range registry.Registry {
		if needsPathSyscalls(&registry.Registry[i]) && matchAny(registry.Registry[i].Uses, base) {
			return true
		}
	}
	return false
}

// genericVars are variables that cache paths use but that say nothing of
// a framework being at work.
var genericVars = map[string]bool{"HOME": true, "XDG_CACHE_HOME": true, "TMPDIR": true, "TEMP": true, "TMP": true,
	"USER": true, "LOGNAME": true}

// FrameworkVar names a variable set (non-empty) in env that places or
// switches the cache of a framework in the Registry whose lookups need the
// path syscalls (TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, CUDA_CACHE_DISABLE…), or "".
func FrameworkVar(env registry.Env) string {
	return firstSet(env, frameworkVars(registry.Registry))
}

// frameworkVars are the variables FrameworkVar looks for, in its order.
func frameworkVars(specs []registry.Spec) []string {
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for i := range specs {
		s := &specs[i]
		if !needsPathSyscalls(s) {
			// Offline, a weights cache's lookups are its whole story:
			// its misses fail (no download to see) and its hits are
			// often small files the page cache does not name.
			for _, sw := range s.Switches {
				if sw.Offline && !s.PageCacheEvidence {
					add(sw.Env)
				}
			}
			continue
		}
		for _, p := range append(append([]string{}, s.Paths...), s.Also...) {
			for _, v := range pathVars(p) {
				if !genericVars[v] {
					add(v)
				}
			}
		}
		for _, sw := range s.Switches {
			add(sw.Env)
		}
	}
	return out
}

// firstSet is the first of vars set (non-empty) in env, or "".
func firstSet(env registry.Env, vars []string) string {
	for _, v := range vars {
		if env[v] != "" {
			return v
		}
	}
	return ""
}

// pathVars are the $VARs of a registry path.
func pathVars(p string) []string {
	var out []string
	for {
		i := strings.IndexByte(p, '$')
		if i < 0 {
			return out
		}
		p = p[i+1:]
		j := strings.IndexFunc(p, func(r rune) bool { return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if j < 0 {
			j = len(p)
		}
		out = append(out, p[:j])
		p = p[j:]
	}
}

// frameworkVarOf is FrameworkVar of pid's environment.
func (c *Collector) frameworkVarOf(pid int32) string {
	if p := c.procs[pid]; p != nil {
		return firstSet(p.env, c.fwVars)
	}
	return ""
}

// ImportedFramework names the package of a framework in the Registry
// whose lookups need the path syscalls that a Python file at p belongs to (a directory of p named as one of
// the specs' Packages), or "".
func ImportedFramework(p string) string {
	// Cleaned once; each level up is then a cut at its last slash (a
	// path.Dir a level cleaned and copied the rest again, for every
	// Python file a traced process read).
	dir := path.Dir(p)
	for dir != "/" && dir != "." && dir != "" {
		cut := strings.LastIndexByte(dir, '/')
		base := dir[cut+1:]
		for i := range registry.Registry {
			if !needsPathSyscalls(&registry.Registry[i]) {
				continue
			}
			for _, pkg := range registry.Registry[i].Packages {
				if base == pkg {
					return pkg
				}
			}
		}
		if cut <= 0 {
			break // the top: "/name" or "name"
		}
		dir = dir[:cut]
	}
	return ""
}

// noteUse records that pid opened or executed p: the frameworks p
// belongs to are at work in it.
func (c *Collector) noteUse(pid int32, p string) {
	base := path.Base(p)
	names, ok := c.usesOf[base]
	if !ok {
		for i := range c.specs {
			if s := &c.specs[i]; matchAny(s.Uses, base) {
				names = append(names, s.Name)
			}
		}
		if c.usesOf == nil || len(c.usesOf) >= usesOfMax {
			c.usesOf = map[string][]string{}
		}
		c.usesOf[base] = names
	}
	for _, name := range names {
		if c.used[name] == nil {
			c.used[name] = map[int32]bool{}
		}
		c.used[name][pid] = true
	}
}

// keep reports whether an event falls under some cache root.
func (c *Collector) keep(ev *FileEvent) bool {
	switch ev.Op {
	case OpOpen, OpLookup, OpMkdir, OpRename:
	case OpUnlink:
		if ev.Errno == 0 {
			return false // a temp file cleaned up: no rule needs it
		}
	default:
		return false
	}
	return c.roots.any(ev.Path) || (ev.NewPath != "" && c.roots.any(ev.NewPath))
}

// Uprobe records one call of a probed compile entry point, made from
// Python stack id stack (0: none); times are CLOCK_MONOTONIC ns.
func (c *Collector) Uprobe(name string, pid int32, start, end, cpu, stack uint64) {
	c.Seen++
	u := c.uprobes[name]
	if u == nil {
		u = &uprobeAcc{}
		c.uprobes[name] = u
	}
	u.calls++
	if end > start {
		u.total += int64(end - start)
	}
	u.cpu += int64(cpu)
	u.windows = append(u.windows, record.JITWindow{PID: pid, StartNS: int64(start), EndNS: int64(end),
		Kind: "uprobe", Source: name, CPUNS: int64(cpu)})
	u.stacks = append(u.stacks, stack)
}

// Warn adds a warning to the result.
func (c *Collector) Warn(s string) { c.warnings = append(c.warnings, s) }

// ProbeState is one uprobe the caller attached, or tried to.
type ProbeState struct {
	Name, Path, Error string
	// Scope says where it was installed ("traced processes only (...), 3
	// processes").
	Scope string
}

// ResultInput is what Result needs from the rest of the record.
type ResultInput struct {
	// StartMono is the CLOCK_MONOTONIC time of the command's release:
	// record times are relative to it.
	StartMono uint64
	WallNS    int64
	Processes []record.Process
	Probes    []ProbeState
	// FS, when set, sizes the written entries and describes each root.
	FS FS
	// Intern names a Python stack id in the record (1 + its index in
	// record.Stacks, 0: not decoded); StackPID is the process it was
	// walked in. Nil: windows and caches carry no stacks.
	Intern   func(id uint64) int
	StackPID func(id uint64) int32
}

// Result classifies everything gathered and returns the record's JIT
// section (nil when there is nothing to say) and warnings.
func (c *Collector) Result(in ResultInput) (*record.JIT, []string) {
	rel := func(ts uint64) int64 {
		if ts <= in.StartMono {
			return 0
		}
		return int64(ts - in.StartMono)
	}
	cs := c.replay(in.FS)
	tree := newProcTree(in.Processes, in.WallNS)
	comps, windows, runs := compilerRuns(tree, c.matcher)
	compile, inproc := compileTimes(cs, tree, runs, rel, in.Intern)
	windows = append(windows, inproc...)

	jit := &record.JIT{Compilers: comps, Caches: c.caches(cs, compile, in, rel)}
	var uwindows []record.JITWindow
	jit.Uprobes, uwindows = c.uprobeRecords(in.Probes, rel, in.Intern)
	windows = append(windows, uwindows...)
	sort.SliceStable(windows, func(i, j int) bool {
		if windows[i].StartNS != windows[j].StartNS {
			return windows[i].StartNS < windows[j].StartNS
		}
		return windows[i].PID < windows[j].PID
	})
	jit.Windows = windows

	warnings := append([]string(nil), c.warnings...)
	if c.dropped > 0 {
		warnings = append(warnings, fmt.Sprintf("jit: %d cache events beyond the first %d were dropped; cache counts are lower bounds", c.dropped, c.cfg.MaxEvents))
	}
	if len(jit.Caches) == 0 && len(jit.Compilers) == 0 && len(jit.Windows) == 0 && len(jit.Uprobes) == 0 {
		return nil, warnings
	}
	return jit, warnings
}

// replay applies the path events in time order to the roots' states.
func (c *Collector) replay(fsys FS) *cacheState {
	sort.SliceStable(c.events, func(i, j int) bool { return c.events[i].TS < c.events[j].TS })
	cs := &cacheState{roots: c.roots, births: map[string]stamp{}}
	if fsys != nil {
		cs.exists = func(p string) bool { _, ok := fsys.Size(p); return ok }
	}
	for i := range c.events {
		cs.apply(&c.events[i])
	}
	cs.finish()
	return cs
}

// rootCompile is one root's compile time, in all and by the Python stack
// of the miss that started each episode (0: none).
type rootCompile struct {
	ns      int64
	byStack map[uint64]int64
}

// compileTimes are the compile time of each root (in-process compile
// time of each filled miss, less that of the misses nested in it on the
// same thread, plus the compiler runs it started) and the in-process
// compile windows, each with its miss's stack when intern names it.
func compileTimes(cs *cacheState, tree *procTree, runs []compilerRun, rel func(uint64) int64,
	intern func(uint64) int) (map[*rootState]*rootCompile, []record.JITWindow) {
	var eps []*episode
	for _, r := range cs.sortedRoots() {
		if !r.root.Spec.Compiles {
			continue
		}
		for _, ep := range r.episodes {
			if (ep.filled || ep.lost) && ep.end.ts > ep.start.ts {
				eps = append(eps, ep)
			}
		}
	}
	inprocCPU(eps)
	// Each compiler run belongs to the innermost miss of an ancestor
	// process that it started in.
	for _, run := range runs {
		var best *episode
		for _, ep := range eps {
			s, e := rel(ep.start.ts), rel(ep.end.ts)
			if run.span.start < s || run.span.start > e || !tree.isAncestor(ep.start.pid, run.pid) {
				continue
			}
			if best == nil || ep.start.ts > best.start.ts {
				best = ep
			}
		}
		if best != nil {
			best.compSpan = append(best.compSpan, run.span)
		}
	}
	compile := map[*rootState]*rootCompile{}
	var inproc []record.JITWindow
	for _, ep := range eps {
		rc := compile[ep.root]
		if rc == nil {
			rc = &rootCompile{byStack: map[uint64]int64{}}
			compile[ep.root] = rc
		}
		ns := int64(ep.inproc) + unionLen(ep.compSpan)
		rc.ns += ns
		if ep.start.stack != 0 {
			rc.byStack[ep.start.stack] += ns
		}
		w := record.JITWindow{PID: ep.start.pid, StartNS: rel(ep.start.ts), EndNS: rel(ep.end.ts),
			Kind: "in_process", Source: ep.root.root.Spec.Name, CPUNS: int64(ep.inproc)}
		if intern != nil && ep.start.stack != 0 {
			w.Stack = intern(ep.start.stack)
		}
		inproc = append(inproc, w)
	}
	return compile, mergeWindows(inproc, 1e6)
}

// caches are the record's caches: the roots with activity, a switch a
// process that used the framework had, a --cache-dir, or a download;
// the costliest first.
func (c *Collector) caches(cs *cacheState, compile map[*rootState]*rootCompile, in ResultInput, rel func(uint64) int64) []record.Cache {
	fsys := in.FS
	var out []record.Cache
	for _, r := range cs.sortedRoots() {
		// A switch counts when a process that had it used the framework
		// (or the cache saw activity from it anyway).
		var sws []registry.Switch
		for _, sw := range r.switches {
			for pid := range r.switchPIDs[sw.Env] {
				if c.used[r.root.Spec.Name][pid] || r.activeBy(pid) {
					sws = append(sws, sw)
					break
				}
			}
		}
		r.switches = sws
		if !r.active() && len(sws) == 0 && r.root.Via != "--cache-dir" && !r.downloadedInto(fsys) {
			continue
		}
		var ns int64
		if comp := compile[r]; comp != nil {
			ns = comp.ns
		}
		rc := c.cacheRecord(r, ns, fsys)
		rc.Failures = r.failureRecords(rel)
		var comp *rootCompile
		if r.root.Spec.Compiles {
			comp = compile[r]
		}
		rc.Stacks = r.stackCharges(comp, in.Intern, in.StackPID)
		out = append(out, rc)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.CompileNS != b.CompileNS {
			return a.CompileNS > b.CompileNS
		}
		if a.Misses != b.Misses {
			return a.Misses > b.Misses
		}
		if a.Hits != b.Hits {
			return a.Hits > b.Hits
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Root < b.Root
	})
	return out
}

// uprobeRecords are the compile uprobes, those attached first, and the
// windows of their calls.
func (c *Collector) uprobeRecords(probes []ProbeState, rel func(uint64) int64, intern func(uint64) int) ([]record.JITUprobe, []record.JITWindow) {
	var ups []record.JITUprobe
	var windows []record.JITWindow
	names := map[string]bool{}
	for _, p := range probes {
		names[p.Name] = true
		u := c.uprobes[p.Name]
		up := record.JITUprobe{Name: p.Name, Path: p.Path, Error: p.Error, Scope: p.Scope}
		if u != nil {
			up.Calls, up.TotalNS, up.CPUNS = u.calls, u.total, u.cpu
		}
		ups = append(ups, up)
	}
	var unames []string
	for n := range c.uprobes {
		unames = append(unames, n)
	}
	sort.Strings(unames)
	for _, n := range unames {
		u := c.uprobes[n]
		if !names[n] {
			ups = append(ups, record.JITUprobe{Name: n, Calls: u.calls, TotalNS: u.total, CPUNS: u.cpu})
		}
		ws := make([]record.JITWindow, len(u.windows))
		for i, w := range u.windows {
			w.StartNS, w.EndNS = rel(uint64(w.StartNS)), rel(uint64(w.EndNS))
			if intern != nil && u.stacks[i] != 0 {
				w.Stack = intern(u.stacks[i])
			}
			ws[i] = w
		}
		windows = append(windows, mergeWindows(ws, 1e5)...)
	}
	return ups, windows
}

// movedWithSources reports whether the in-tree entry p (below a
// directory named anywhere) went with its sources: the directory that
// holds that one is gone too. pip installs into a temporary tree, compiles
// its modules there and moves the tree; a build removes its scratch tree.
// Neither is a cache that failed to keep an entry.
func movedWithSources(fs FS, p, anywhere string) bool {
	if anywhere == "" {
		return false
	}
	i := strings.LastIndex(p, "/"+anywhere+"/")
	if i < 0 {
		return false
	}
	// The directory itself first: through a linked source directory,
	// which IsDir does not follow at its end.
	return !fs.IsDir(p[:i+1+len(anywhere)]) && !fs.IsDir(cmp.Or(p[:i], "/"))
}

func (c *Collector) cacheRecord(r *rootState, compileNS int64, fs FS) record.Cache {
	s := r.root.Spec
	rc := record.Cache{Name: s.Name, Root: r.root.Path, Lookups: r.lookups, Hits: r.hits, Misses: r.misses,
		EntriesWritten: r.written, CompileNS: compileNS, Framework: s.Framework, Via: r.root.Via, LimitBytes: r.limit,
		EntriesStale: r.stale, MissedKeys: r.keys.missed.sorted(), WrittenKeys: r.keys.written.sorted(),
		StaleKeys: r.keys.stale.sorted(), HitKeys: r.keys.hit.sorted(), KeysCapped: r.keys.capped(), MovedBy: movedBy(*s), KeyIncludes: s.Key}
	if !s.Compiles {
		rc.CompileNS = 0
	}
	if fs != nil {
		var paths []string
		for p := range r.fills {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			n, ok := fs.Size(p)
			// Where every file is an entry, a directory in its place
			// is no entry: Python wrote a .pyc whose path was a
			// directory, and its rename failed (unseen without the
			// path syscalls): the compile was not kept.
			if ok && s.EntryDepth == 0 && fs.IsDir(p) {
				ok = false
			}
			if ok && n > 0 {
				rc.BytesWritten += uint64(n)
			}
			if !ok && !movedWithSources(fs, p, r.root.Anywhere) {
				rc.EntriesGone++
			}
		}
		if r.root.Anywhere == "" {
			h := fs.Health(r.root.Path)
			rc.FS, rc.Volatile, rc.Missing = h.FS, h.Volatile, h.Missing
			rc.ContainerLayer = h.ContainerLayer
			rc.SizeBytes, rc.Files, rc.SizeCapped = h.Size, h.Files, h.Capped
			rc.Unreadable = h.Unreadable
		}
	}
	for _, sw := range r.switches {
		if sw.Offline {
			if rc.Offline == "" {
				rc.Offline = sw.Env
			} else {
				rc.Offline += ", " + sw.Env
			}
			rc.Notes = append(rc.Notes, sw.Env+": "+sw.Effect)
			continue
		}
		if rc.Disabled == "" {
			rc.Disabled = sw.Env
		} else {
			rc.Disabled += ", " + sw.Env
		}
		rc.Notes = append(rc.Notes, sw.Env+": "+sw.Effect)
	}
	// A weights cache that is lost means the next run downloads again.
	again := "starts cold"
	if !s.Compiles {
		again = "downloads again"
	}
	if rc.Volatile {
		rc.Notes = append(rc.Notes, "on "+rc.FS+": emptied on reboot, so the first run after a boot "+again)
	}
	if rc.ContainerLayer {
		rc.Notes = append(rc.Notes, "on "+rc.FS+": a container's writable layer, lost when the container is replaced, so a new container "+again)
	}
	if rc.Missing {
		rc.Notes = append(rc.Notes, "the directory does not exist at the end of the run: nothing was kept")
	}
	if rc.LimitBytes > 0 && rc.SizeBytes >= rc.LimitBytes*9/10 {
		rc.Notes = append(rc.Notes, fmt.Sprintf("%d of %d bytes used: near its size limit, entries will be evicted", rc.SizeBytes, rc.LimitBytes))
	}
	if r.root.Anywhere != "" {
		rc.Notes = append(rc.Notes, "in-tree: every "+r.root.Anywhere+" directory beside the sources")
	}
	return rc
}

// inprocCPU sets each episode's in-process CPU: the on-CPU time of the
// thread that missed, from the miss to the fill, when the same thread
// filled it, less the time of episodes nested in it on that thread.
func inprocCPU(eps []*episode) {
	byTID := map[int32][]*episode{}
	for _, ep := range eps {
		if ep.end.tid == ep.start.tid && ep.end.cpu >= ep.start.cpu {
			ep.inproc = ep.end.cpu - ep.start.cpu
			byTID[ep.start.tid] = append(byTID[ep.start.tid], ep)
		}
	}
	for _, list := range byTID {
		sort.Slice(list, func(i, j int) bool {
			if list[i].start.ts != list[j].start.ts {
				return list[i].start.ts < list[j].start.ts
			}
			return list[i].end.ts > list[j].end.ts
		})
		nested := map[*episode]uint64{}
		var stack []*episode
		for _, ep := range list {
			for len(stack) > 0 && stack[len(stack)-1].end.ts <= ep.start.ts {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 && ep.end.ts <= stack[len(stack)-1].end.ts {
				nested[stack[len(stack)-1]] += ep.inproc
			}
			stack = append(stack, ep)
		}
		for ep, n := range nested {
			if n >= ep.inproc {
				ep.inproc = 0
			} else {
				ep.inproc -= n
			}
		}
	}
}

// mergeWindows joins windows of the same process, kind, source and
// Python stack that overlap or lie within gap ns of each other.
func mergeWindows(ws []record.JITWindow, gap int64) []record.JITWindow {
	if len(ws) == 0 {
		return nil
	}
	sort.SliceStable(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Stack != b.Stack {
			return a.Stack < b.Stack
		}
		return a.StartNS < b.StartNS
	})
	out := []record.JITWindow{ws[0]}
	for _, w := range ws[1:] {
		last := &out[len(out)-1]
		if w.PID == last.PID && w.Kind == last.Kind && w.Source == last.Source && w.Stack == last.Stack && w.StartNS <= last.EndNS+gap {
			last.EndNS = max(last.EndNS, w.EndNS)
			last.CPUNS += w.CPUNS
			continue
		}
		out = append(out, w)
	}
	return out
}
