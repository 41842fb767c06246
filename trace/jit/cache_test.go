package jit

import (
	"errors"
	"fmt"
	"path"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

type fakeProc struct {
	env map[int32]string
	cwd map[int32]string
}

func (f fakeProc) Environ(pid int32) ([]byte, error) {
	if e, ok := f.env[pid]; ok {
		return []byte(e), nil
	}
	return nil, errors.New("gone")
}

func (f fakeProc) Cwd(pid int32) (string, error) {
	if c, ok := f.cwd[pid]; ok {
		return c, nil
	}
	return "", errors.New("gone")
}

func (fakeProc) Fd(int32, int32) (string, error) { return "", errors.New("gone") }

type fakeFS map[string]int64

func (f fakeFS) Size(p string) (int64, bool) { n, ok := f[p]; return n, ok }
func (fakeFS) IsDir(string) bool             { return false }
func (fakeFS) Health(string) Health          { return Health{FS: "ext4"} }

const (
	rd    = 0
	wr    = 0x1 | oCreat | oTrunc
	excl  = 0x1 | oCreat | oExcl
	dirfl = oDirectory
)

// script drives a collector with a readable event list.
type script struct {
	t  *testing.T
	c  *Collector
	ts uint64
}

func newScript(t *testing.T, cfg Config) *script {
	t.Helper()
	if cfg.Proc == nil {
		cfg.Proc = fakeProc{cwd: map[int32]string{}}
	}
	c, err := NewCollector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &script{t: t, c: c, ts: 1000}
}

func (s *script) env(pid int32, kv ...string) {
	b := []byte{}
	for _, x := range kv {
		b = append(b, x...)
		b = append(b, 0)
	}
	s.c.Exec(pid, 1000, "/usr/bin/prog", b)
}

// do runs one syscall at the next millisecond; cpu is the thread's CPU so far (ms).
func (s *script) do(pid int32, op Op, p string, flags uint32, ret int64, cpuMS uint64, p2 ...string) {
	s.ts += 1e6
	r := RawFile{TS: s.ts, PID: pid, TID: pid, Op: op, Dfd: AtFDCWD, Dfd2: AtFDCWD, Path: p, Flags: flags, Ret: ret, CPUNS: cpuMS * 1e6}
	if len(p2) > 0 {
		r.Path2 = p2[0]
	}
	s.c.File(r)
}

func (s *script) at(ms uint64) { s.ts = ms*1e6 - 1e6 } // the next do runs at ms

func (s *script) result(procs ...record.Process) *record.JIT {
	j, _ := s.c.Result(ResultInput{StartMono: 0, WallNS: int64(s.ts), Processes: procs, FS: fakeFS{}})
	return j
}

func cacheIn(t *testing.T, j *record.JIT, name string) record.Cache {
	t.Helper()
	if j != nil {
		for _, c := range j.Caches {
			if c.Name == name {
				return c
			}
		}
	}
	t.Fatalf("no cache %q in %+v", name, j)
	return record.Cache{}
}

func counts(c record.Cache) string {
	return fmt.Sprintf("lookups %d hits %d misses %d written %d", c.Lookups, c.Hits, c.Misses, c.EntriesWritten)
}

const enoent, eexist = -2, -17

func TestTritonMissThenHit(t *testing.T) {
	s := newScript(t, Config{})
	s.env(10, "TRITON_CACHE_DIR=/c", "HOME=/h")
	key := "/c/KEY"
	s.do(10, OpMkdir, key, 0, 0, 1)
	s.do(10, OpLookup, key+"/__grp__k.json", 0, enoent, 1)
	s.do(10, OpMkdir, key+"/tmp.pid_10_0", 0, 0, 1)
	s.do(10, OpOpen, key+"/tmp.pid_10_0/k.so", wr, 3, 2)
	s.do(10, OpOpen, key+"/tmp.pid_10_0/__grp__k.json", wr, 3, 3)
	s.do(10, OpRename, key+"/tmp.pid_10_0/k.so", 0, 0, 50, key+"/k.so")
	s.do(10, OpRename, key+"/tmp.pid_10_0/__grp__k.json", 0, 0, 50, key+"/__grp__k.json")
	// Reading back its own entry is not a hit.
	s.do(10, OpOpen, key+"/k.so", rd, 3, 51)
	// Another process finds it: a hit.
	s.env(11, "TRITON_CACHE_DIR=/c")
	s.do(11, OpMkdir, key, 0, eexist, 0)
	s.do(11, OpOpen, key+"/__grp__k.json", rd, 3, 0)
	s.do(11, OpOpen, key+"/k.so", rd, 3, 0)
	c := cacheIn(t, s.result(), "triton")
	if got := counts(c); got != "lookups 2 hits 1 misses 1 written 1" {
		t.Errorf("triton: %s", got)
	}
	if c.CompileNS != 49e6 { // in-process CPU from the mkdir (1 ms) to the first rename (50 ms)
		t.Errorf("compile_ns %d", c.CompileNS)
	}
}

func TestPythonBytecode(t *testing.T) {
	s := newScript(t, Config{})
	s.env(20, "PYTHONPYCACHEPREFIX=/pyc")
	pyc := "/pyc/usr/lib/python3/json/__init__.cpython-311.pyc"
	s.do(20, OpOpen, pyc, rd, enoent, 10)
	s.do(20, OpMkdir, "/pyc/usr/lib/python3/json", 0, 0, 11)
	s.do(20, OpOpen, pyc+".140234", excl, 3, 14)
	s.do(20, OpRename, pyc+".140234", 0, 0, 15, pyc)
	// Failed lookup never filled (a read-only source dir, say).
	s.do(20, OpOpen, "/pyc/ro/x.cpython-311.pyc", rd, enoent, 16)
	// Files of other caches under the same in-tree pattern are not Python's.
	s.do(20, OpOpen, "/src/__pycache__/mod.f-3.py311.nbi", rd, enoent, 16)
	j := s.result()
	c := cacheIn(t, j, "python")
	if got := counts(c); got != "lookups 2 hits 0 misses 2 written 1" || c.Root != "/pyc" {
		t.Errorf("python: %s at %s", got, c.Root)
	}
	if c.CompileNS != 5e6 {
		t.Errorf("compile_ns %d", c.CompileNS)
	}
	if n := cacheIn(t, j, "numba"); n.Misses != 1 {
		t.Errorf("numba: %s", counts(n))
	}

	s = newScript(t, Config{})
	s.env(21, "PYTHONPYCACHEPREFIX=/pyc")
	s.do(21, OpOpen, pyc, rd, 3, 1)
	// A stale .pyc: read, then rewritten: a miss, not a hit.
	stale := "/pyc/a/b.cpython-311.pyc"
	s.do(21, OpOpen, stale, rd, 3, 2)
	s.do(21, OpOpen, stale+".99", excl, 4, 5)
	s.do(21, OpRename, stale+".99", 0, 0, 6, stale)
	c = cacheIn(t, s.result(), "python")
	if got := counts(c); got != "lookups 2 hits 1 misses 1 written 1" {
		t.Errorf("python warm: %s", got)
	}
}

func TestRelativeAndDirfdPaths(t *testing.T) {
	s := newScript(t, Config{Proc: fakeProc{cwd: map[int32]string{30: "/work"}}})
	s.env(30, "TRITON_CACHE_DIR=tc")
	// openat(AT_FDCWD, "tc/KEY", O_DIRECTORY) = 5, then openat(5, "__grp__k.json").
	s.do(30, OpOpen, "tc/KEY", dirfl, 5, 0)
	s.ts += 1e6
	s.c.File(RawFile{TS: s.ts, PID: 30, TID: 30, Op: OpOpen, Dfd: 5, Path: "__grp__k.json", Ret: 6})
	// chdir into the cache, then a relative open.
	s.do(30, OpChdir, "tc", 0, 0, 0)
	s.do(30, OpOpen, "OTHER/k.so", rd, 7, 0)
	c := cacheIn(t, s.result(), "triton")
	if c.Root != "/work/tc" || c.Hits != 2 {
		t.Errorf("triton at %s: %s", c.Root, counts(c))
	}
}

func TestChildEnvironment(t *testing.T) {
	s := newScript(t, Config{})
	s.env(40, "HOME=/h")
	s.c.Fork(41, 40)
	// The child was started with its own TRITON_CACHE_DIR.
	s.env(41, "HOME=/h", "TRITON_CACHE_DIR=/child")
	s.do(41, OpMkdir, "/child/K", 0, 0, 0)
	s.do(41, OpRename, "/child/K/x.tmp.pid_41_1", 0, 0, 10, "/child/K/x.cubin")
	j := s.result()
	c := cacheIn(t, j, "triton")
	if c.Root != "/child" || c.Misses != 1 || c.Via != "TRITON_CACHE_DIR" {
		t.Errorf("triton %s at %s via %s", counts(c), c.Root, c.Via)
	}
}

func TestNotEntries(t *testing.T) {
	s := newScript(t, Config{CacheDirs: []string{"k=/k"}, Cwd: "/"})
	// A scratch file written in place and gone at the end: no entry.
	s.do(50, OpOpen, "/k/scratch", wr, 3, 0)
	s.env(50, "POCL_CACHE_DIR=/pocl", "MESA_SHADER_CACHE_DIR=/mesa")
	// PoCL hit that touches last_accessed; Mesa hit that opens index RDWR|CREAT.
	s.do(50, OpOpen, "/pocl/ab/cdef/program.bc", rd, 3, 0)
	s.do(50, OpOpen, "/pocl/ab/cdef/last_accessed", wr, 3, 0)
	s.do(50, OpOpen, "/mesa/index", 0x2|oCreat, 3, 0)
	s.do(50, OpOpen, "/mesa/12/3456", rd, 3, 0)
	// An O_TMPFILE in the cache, and a temp renamed to another temp.
	s.do(50, OpOpen, "/mesa", oTmpfile|0x2, 4, 0)
	s.do(50, OpRename, "/mesa/ab/x.tmp", 0, 0, 0, "/mesa/ab/y.tmp")
	j := s.result()
	if p := cacheIn(t, j, "pocl"); counts(p) != "lookups 1 hits 1 misses 0 written 0" {
		t.Errorf("pocl: %s", counts(p))
	}
	if m := cacheIn(t, j, "mesa"); counts(m) != "lookups 1 hits 1 misses 0 written 0" {
		t.Errorf("mesa: %s", counts(m))
	}
	if k := cacheIn(t, j, "k"); counts(k) != "lookups 0 hits 0 misses 0 written 0" {
		t.Errorf("k: %s", counts(k))
	}
}

// A shell script: the lookup is the shell's, the compile a cc child's,
// the fill an mv's; one miss, and the cc subtree's wall is the compile.
func TestCompileAcrossProcesses(t *testing.T) {
	s := newScript(t, Config{CacheDirs: []string{"k=/kc"}, Cwd: "/"})
	s.env(60)
	s.at(100)
	s.do(60, OpLookup, "/kc/entry", 0, enoent, 5)
	s.at(900)
	s.do(65, OpRename, "/tmp/build.out", 0, 0, 1, "/kc/entry")
	procs := []record.Process{
		{PID: 60, PPID: 1, Comm: "sh", StartNS: 0, EndNS: 1000e6, Exited: true, CPUNS: 10e6},
		{PID: 61, PPID: 60, Comm: "cc", StartNS: 200e6, EndNS: 700e6, Exited: true, CPUNS: 2e6},
		{PID: 62, PPID: 61, Comm: "cc1", StartNS: 210e6, EndNS: 600e6, Exited: true, CPUNS: 380e6},
		{PID: 63, PPID: 61, Comm: "as", StartNS: 600e6, EndNS: 650e6, Exited: true, CPUNS: 40e6},
		{PID: 64, PPID: 61, Comm: "collect2", StartNS: 650e6, EndNS: 700e6, Exited: true, CPUNS: 1e6},
		{PID: 66, PPID: 64, Comm: "ld", StartNS: 655e6, EndNS: 720e6, Exited: true, CPUNS: 30e6},
		{PID: 67, PPID: 61, Comm: "sh", StartNS: 690e6, EndNS: 695e6, Exited: true, CPUNS: 3e6},
		{PID: 65, PPID: 60, Comm: "mv", StartNS: 890e6, EndNS: 905e6, Exited: true, CPUNS: 1e6},
	}
	j := s.result(procs...)
	c := cacheIn(t, j, "k")
	if counts(c) != "lookups 1 hits 0 misses 1 written 1" {
		t.Errorf("k: %s", counts(c))
	}
	// cc's subtree runs from 200 ms to ld's end at 720 ms.
	if c.CompileNS != 520e6 {
		t.Errorf("compile_ns %d, want 520e6", c.CompileNS)
	}
	want := map[string]record.Compiler{
		"cc":       {Name: "cc", Runs: 1, WallNS: 520e6, CPUNS: 5e6}, // with its sh child
		"cc1":      {Name: "cc1", Runs: 1, WallNS: 390e6, CPUNS: 380e6},
		"as":       {Name: "as", Runs: 1, WallNS: 50e6, CPUNS: 40e6},
		"collect2": {Name: "collect2", Runs: 1, WallNS: 70e6, CPUNS: 1e6},
		"ld":       {Name: "ld", Runs: 1, WallNS: 65e6, CPUNS: 30e6},
	}
	if len(j.Compilers) != len(want) {
		t.Errorf("compilers %+v", j.Compilers)
	}
	for _, got := range j.Compilers {
		if got != want[got.Name] {
			t.Errorf("compiler %+v, want %+v", got, want[got.Name])
		}
	}
	var kinds []string
	for _, w := range j.Windows {
		kinds = append(kinds, fmt.Sprintf("%s/%s/%d/%d-%d", w.Kind, w.Source, w.PID, w.StartNS/1e6, w.EndNS/1e6))
	}
	if fmt.Sprint(kinds) != "[in_process/k/60/100-900 compiler/cc/61/200-720]" {
		t.Errorf("windows %v", kinds)
	}
}

func TestNestedInProcess(t *testing.T) {
	s := newScript(t, Config{CacheDirs: []string{"outer=/o", "inner=/i"}, Cwd: "/"})
	s.env(70)
	s.do(70, OpOpen, "/o/e", rd, enoent, 0)
	s.do(70, OpOpen, "/i/e", rd, enoent, 10)
	s.do(70, OpRename, "/i/e.tmp", 0, 0, 30, "/i/e")
	s.do(70, OpRename, "/o/e.tmp", 0, 0, 100, "/o/e")
	j := s.result()
	if o := cacheIn(t, j, "outer"); o.CompileNS != 80e6 {
		t.Errorf("outer compile %d, want 80e6", o.CompileNS)
	}
	if i := cacheIn(t, j, "inner"); i.CompileNS != 20e6 {
		t.Errorf("inner compile %d, want 20e6", i.CompileNS)
	}
}

func TestInductorWorkers(t *testing.T) {
	procs := []record.Process{
		{PID: 1, Comm: "python", StartNS: 0, EndNS: 100, Exited: true},
		{PID: 2, PPID: 1, Comm: "python", Args: []string{"python", "/x/torch/_inductor/compile_worker/__main__.py"}, StartNS: 5, EndNS: 90, Exited: true, CPUNS: 7},
		{PID: 3, PPID: 2, Comm: "python", StartNS: 6, EndNS: 80, Exited: true, CPUNS: 50},
		{PID: 4, PPID: 3, Comm: "g++", StartNS: 10, EndNS: 20, Exited: true, CPUNS: 9},
	}
	list, windows, runs := compilerRuns(newProcTree(procs, 100), NewMatcher(nil, nil))
	if len(runs) != 1 || runs[0].pid != 2 || runs[0].span != (span{5, 90}) {
		t.Errorf("runs %+v", runs)
	}
	if fmt.Sprint(list) != "[{inductor_compile_worker 1 85 57} {g++ 1 10 9}]" {
		t.Errorf("list %v", list)
	}
	var pids []int32
	for _, w := range windows {
		pids = append(pids, w.PID)
	}
	if fmt.Sprint(pids) != "[2 3]" {
		t.Errorf("windows %+v", windows)
	}
}

// TestCompilerAskedItsVersionIsNoRun: pip runs `rustc --version` for its
// user agent; build scripts ask `cc -dumpversion`. Neither compiles, and
// a warm rerun runs them again: no compiler run, no window.
func TestCompilerAskedItsVersionIsNoRun(t *testing.T) {
	procs := []record.Process{
		{PID: 1, Comm: "python3", StartNS: 0, EndNS: 100, Exited: true},
		{PID: 2, PPID: 1, Comm: "rustc", Args: []string{"rustc", "--version"}, StartNS: 5, EndNS: 90, Exited: true, CPUNS: 80},
		{PID: 3, PPID: 1, Comm: "cc", Args: []string{"cc", "-dumpversion"}, StartNS: 91, EndNS: 92, Exited: true, CPUNS: 1},
		{PID: 4, PPID: 1, Comm: "cc", Args: []string{"cc", "-c", "x.c"}, StartNS: 93, EndNS: 99, Exited: true, CPUNS: 5},
	}
	list, windows, runs := compilerRuns(newProcTree(procs, 100), NewMatcher(nil, nil))
	if fmt.Sprint(list) != "[{cc 1 6 5}]" || len(windows) != 1 || len(runs) != 1 || runs[0].pid != 4 {
		t.Errorf("list %v, windows %+v, runs %+v: want only cc -c x.c", list, windows, runs)
	}
}

func TestMatcher(t *testing.T) {
	m := NewMatcher([]string{"mycc"}, nil)
	for _, n := range []string{"cc", "gcc-13", "clang++-18", "x86_64-linux-gnu-g++-13", "ptxas", "cc1plus", "mycc"} {
		if !m.MatchName(n) {
			t.Errorf("%q not a compiler", n)
		}
	}
	for _, n := range []string{"python3", "bash", "ldconfig", "cat", ""} {
		if m.MatchName(n) {
			t.Errorf("%q is a compiler", n)
		}
	}
}

func TestSwitchedCacheNeedsUse(t *testing.T) {
	s := newScript(t, Config{})
	s.env(80, "CUDA_CACHE_DISABLE=1", "PYTHONDONTWRITEBYTECODE=1", "HOME=/h")
	if j := s.result(); j != nil {
		t.Fatalf("reported %+v without any CUDA or Python at work", j.Caches)
	}
	s = newScript(t, Config{})
	s.env(80, "CUDA_CACHE_DISABLE=1", "HOME=/h")
	s.do(80, OpOpen, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", rd, 3, 0)
	c := cacheIn(t, s.result(), "cuda")
	if c.Disabled != "CUDA_CACHE_DISABLE=1" || c.Root != "/h/.nv/ComputeCache" || len(c.Notes) == 0 {
		t.Errorf("cuda %+v", c)
	}
}

func TestMergeWindows(t *testing.T) {
	ws := []record.JITWindow{
		{PID: 1, StartNS: 0, EndNS: 10, Kind: "k", Source: "a", CPUNS: 1},
		{PID: 1, StartNS: 12, EndNS: 20, Kind: "k", Source: "a", CPUNS: 1},
		{PID: 1, StartNS: 50, EndNS: 60, Kind: "k", Source: "a", CPUNS: 1},
		{PID: 2, StartNS: 12, EndNS: 20, Kind: "k", Source: "a", CPUNS: 1},
	}
	got := mergeWindows(ws, 5)
	if len(got) != 3 || got[0].EndNS != 20 || got[0].CPUNS != 2 {
		t.Errorf("merged %+v", got)
	}
}

func TestPycUnderPrefixBesideNumba(t *testing.T) {
	s := newScript(t, Config{})
	s.env(90, "PYTHONPYCACHEPREFIX=/pyc")
	// A source tree that has a __pycache__ component, mirrored under the prefix.
	s.do(90, OpOpen, "/pyc/src/__pycache__/gen/m.cpython-311.pyc", rd, 3, 0)
	// In-tree Numba files and a plain in-tree .pyc (Python uses the prefix: not its cache).
	s.do(90, OpOpen, "/src/__pycache__/m.f-1.py311.nbi", rd, 3, 0)
	j := s.result()
	if c := cacheIn(t, j, "python"); c.Root != "/pyc" || c.Hits != 1 {
		t.Errorf("python %s at %s", counts(c), c.Root)
	}
	if c := cacheIn(t, j, "numba"); c.Hits != 1 {
		t.Errorf("numba %s", counts(c))
	}
}

// globMatch agrees with path.Match on every registry pattern.
func TestGlobMatch(t *testing.T) {
	names := []string{"", "a", "tmp", "tmp.pid_1_2", "x.tmp.pid_3", ".1.2.tmp", "x.tmp", ".tmp", "locks", "a.lock",
		"k_tmp_12", "k_tmp_x", "f.incomplete", "key-cache", "key-atime", "tmpabc", "m.nbi", "m.1.nbc",
		"a.tmp.b", "tempfile42", "last_accessed", "x.pyc", "x.pyc.123", "x.engine", "libcuda.so.1", "python3.11"}
	for _, s := range registry.Registry {
		for _, list := range [][]string{s.Entries, s.Temp, s.Ignore, s.Uses} {
			for _, g := range list {
				for _, n := range names {
					want, _ := path.Match(g, n)
					if got := globMatch(g, n); got != want {
						t.Errorf("globMatch(%q, %q) = %v, path.Match says %v", g, n, got, want)
					}
				}
			}
		}
	}
}
