package jit

import (
	"slices"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/trace/probe"
)

func TestPycacheNames(t *testing.T) {
	for exe, want := range map[string]string{"/usr/bin/python3.11": "cpython-311", "/opt/py/bin/python3.12d": "cpython-312",
		"/usr/bin/python3": "", "/usr/bin/perl": ""} {
		if got := pycacheTag(exe); got != want {
			t.Errorf("pycacheTag(%q) = %q, want %q", exe, got, want)
		}
	}
	for name, want := range map[string]string{"a/__pycache__/m.cpython-311.pyc": "cpython-311",
		"m.cpython-312.opt-1.pyc": "cpython-312", "m.pyc": ""} {
		if got := tagOfPyc(name); got != want {
			t.Errorf("tagOfPyc(%q) = %q, want %q", name, got, want)
		}
	}
	for _, c := range []struct{ src, tag, prefix, want string }{
		{"/usr/lib/python3.11/json/__init__.py", "cpython-311", "", "/usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc"},
		{"/src/app/mod.py", "cpython-312", "/pyc", "/pyc/src/app/mod.cpython-312.pyc"},
		{"/src/mod.py", "", "", ""},
		{"rel/mod.py", "cpython-311", "", ""},
		{"/src/mod.pyw", "cpython-311", "", ""},
	} {
		if got := cacheFromSource(c.src, c.tag, c.prefix); got != c.want {
			t.Errorf("cacheFromSource(%q, %q, %q) = %q, want %q", c.src, c.tag, c.prefix, got, c.want)
		}
	}
	for p, want := range map[string]string{"/a/__pycache__/m.cpython-311.pyc.140234": "/a/__pycache__/m.cpython-311.pyc",
		"/a/m.pyc.tmp": "", "/a/m.pyc": ""} {
		got, ok := entryOfTemp(p)
		if got != want || ok != (want != "") {
			t.Errorf("entryOfTemp(%q) = %q, %v; want %q", p, got, ok, want)
		}
	}
	if _, noWrite := pythonArgs([]string{"python3", "-uB", "x.py"}); !noWrite {
		t.Error("-uB: bytecode writing not seen off")
	}
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"python3", "main.py", "-c", "x"}, "main.py"},
		{[]string{"python3", "-u", "-W", "ignore", "-X", "dev", "/a/b.py"}, "/a/b.py"},
		{[]string{"python3", "-Wignore", "b.py"}, "b.py"},
		{[]string{"python3", "-c", "import x"}, ""},
		{[]string{"python3", "-uBc", "import x"}, ""},
		{[]string{"python3", "-m", "pkg"}, ""},
		{[]string{"python3", "-"}, ""},
		{[]string{"python3"}, ""},
	} {
		if got, _ := pythonArgs(c.argv); got != c.want {
			t.Errorf("pythonArgs(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}

func TestImportedFramework(t *testing.T) {
	for p, want := range map[string]string{
		"/usr/lib/python3/dist-packages/numba/__pycache__/__init__.cpython-311.pyc": "numba",
		"/venv/lib/python3.12/site-packages/triton/runtime/cache.py":                "triton",
		"/venv/lib/python3.12/site-packages/huggingface_hub/file_download.py":       "",
		"/usr/lib/python3.11/json/__init__.py":                                      "",
		// At whatever level of the path, relative and unclean ones too.
		"/numba/x.py":                     "numba",
		"numba/x.py":                      "numba",
		"/site-packages/triton/c/d/e.py":  "triton",
		"numba/a/b/c/x.py":                "numba",
		"/a//numba/./b/../x.py":           "numba",
		"/numba":                          "",
		"x.py":                            "",
		"/site-packages/tritonx/c/d/e.py": "",
	} {
		if got := ImportedFramework(p); got != want {
			t.Errorf("ImportedFramework(%q) = %q, want %q", p, got, want)
		}
	}
	if UsesFramework("python3.11") {
		t.Error("the interpreter alone attaches the path syscalls: its bytecode cache is told from the page cache")
	}
	if !UsesFramework("libtorch_python.so") {
		t.Error("libtorch_python.so no longer attaches the path syscalls")
	}
}

// TestPythonFromPageCache: the page-cache records of a Python process's
// reads and new files count as the path events of its bytecode cache
// would: sources compiled are misses (not the main script, not a source
// read as data), .pyc reads hits, a temp .pyc created an entry written, a
// stale .pyc a miss; with bytecode writing off every source read is a miss.
func TestPythonFromPageCache(t *testing.T) {
	s := newScript(t, Config{})
	s.env(50, "PYTHONPYCACHEPREFIX=/pyc")
	pp := &pyProc{tag: "cpython-311", script: "/app/main.py"}
	seen := func(pid int32, kind probe.SeenKind, p string, cpuMS uint64) {
		s.ts += 1e6
		s.c.PythonFile(probe.FileSeen{PID: pid, TID: pid, TS: s.ts, CPUNS: cpuMS * 1e6, Path: p, Kind: kind}, pp)
	}
	seen(50, probe.SeenPythonRead, "/app/main.py", 1) // the main script: no lookup
	// Cold: json compiled and written; csv read, nothing written: data.
	seen(50, probe.SeenPythonRead, "/usr/lib/python3/json/__init__.py", 2)
	seen(50, probe.SeenCreated, "/pyc/usr/lib/python3/json/__init__.cpython-311.pyc.140234", 7)
	seen(50, probe.SeenPythonRead, "/usr/lib/python3/csv.py", 8)
	// Warm: decimal found.
	seen(50, probe.SeenPythonRead, "/pyc/usr/lib/python3/decimal.cpython-311.pyc", 9)
	// Stale: read, then its source read and the entry written again.
	seen(50, probe.SeenPythonRead, "/pyc/app/util.cpython-311.pyc", 10)
	seen(50, probe.SeenPythonRead, "/app/util.py", 11)
	seen(50, probe.SeenCreated, "/pyc/app/util.cpython-311.pyc.99", 14)
	// A new file that is no Python temp name is nothing.
	seen(50, probe.SeenCreated, "/pyc/app/notes.txt", 15)
	c := cacheIn(t, s.result(), "python")
	if got := counts(c); got != "lookups 3 hits 1 misses 2 written 2" || c.Root != "/pyc" {
		t.Errorf("python: %s at %s", got, c.Root)
	}
	// json: from its source read (2 ms) to its entry (7 ms); util: from
	// its stale read (10 ms) to its entry (14 ms).
	if c.CompileNS != 9e6 {
		t.Errorf("compile_ns %d, want 9 ms", c.CompileNS)
	}

	// Bytecode writing off: each source read is a compile.
	s = newScript(t, Config{})
	s.env(52, "PYTHONPYCACHEPREFIX=/pyc", "PYTHONDONTWRITEBYTECODE=1")
	seen(52, probe.SeenPythonRead, "/usr/lib/python3/csv.py", 1)
	seen(52, probe.SeenPythonRead, "/pyc/usr/lib/python3/decimal.cpython-311.pyc", 2)
	c = cacheIn(t, s.result(), "python")
	if got := counts(c); got != "lookups 2 hits 1 misses 1 written 0" {
		t.Errorf("python, no bytecode written: %s", got)
	}

	// Without a cache tag a source read says nothing.
	s = newScript(t, Config{})
	s.env(51, "PYTHONDONTWRITEBYTECODE=1")
	s.c.PythonFile(probe.FileSeen{PID: 51, TID: 51, TS: 5e6, Path: "/app/x.py", Kind: probe.SeenPythonRead}, &pyProc{})
	if j := s.result(); j != nil {
		for _, c := range j.Caches {
			if c.Name == "python" && c.Lookups != 0 {
				t.Errorf("no tag: python %s", counts(c))
			}
		}
	}
}

// treeFS is a file system of files and directories for the end of a run.
type treeFS struct {
	files map[string]int64
	dirs  map[string]bool
}

func (f treeFS) Size(p string) (int64, bool) { n, ok := f.files[p]; return n, ok }
func (f treeFS) IsDir(p string) bool         { return f.dirs[p] }
func (treeFS) Health(string) Health          { return Health{FS: "ext4"} }

func TestInTreeEntriesOfTwoPackagesAreTwoEntries(t *testing.T) {
	s := newScript(t, Config{})
	s.env(30)
	// pip reads its own package's __init__ bytecode at the start ...
	own := "/usr/lib/python3/dist-packages/pip/__pycache__/__init__.cpython-311.pyc"
	s.do(30, OpOpen, own, rd, 3, 1)
	// ... and compiles the package it installed, much later.
	s.at(900)
	inst := "/tmp/pip-target-x/lib/python/pkg/__pycache__/__init__.cpython-311.pyc"
	s.do(30, OpOpen, inst, rd, enoent, 800)
	s.do(30, OpOpen, inst+".1407", excl, 3, 801)
	s.do(30, OpRename, inst+".1407", 0, 0, 803, inst)
	c := cacheIn(t, s.result(), "python")
	if got := counts(c); got != "lookups 2 hits 1 misses 1 written 1" || c.EntriesStale != 0 {
		t.Errorf("two packages' __init__: %s, %d stale", got, c.EntriesStale)
	}
	// From its own failed lookup (800 ms of CPU) to its entry (803), not
	// from the other package's read at the start.
	if c.CompileNS != 3e6 {
		t.Errorf("compile_ns %d, want 3 ms", c.CompileNS)
	}
	want := strings.TrimPrefix(inst, "/")
	if !slices.Equal(c.WrittenKeys, []string{want}) || !slices.Equal(c.HitKeys, []string{strings.TrimPrefix(own, "/")}) {
		t.Errorf("keys: written %q, hit %q", c.WrittenKeys, c.HitKeys)
	}
}

func TestInTreeEntryGoneWithItsSourcesIsNotLost(t *testing.T) {
	inst := "/tmp/pip-target-x/lib/python/pkg/__pycache__/__init__.cpython-311.pyc"
	for _, tc := range []struct {
		name string
		dirs map[string]bool
		gone uint64
	}{
		// pip moved the tree it installed into: the entry went with it.
		{"tree moved", nil, 0},
		// The sources are there, the entry is not: it was not kept.
		{"sources kept", map[string]bool{"/tmp/pip-target-x/lib/python/pkg": true}, 1},
		{"cache directory kept", map[string]bool{"/tmp/pip-target-x/lib/python/pkg/__pycache__": true}, 1},
	} {
		s := newScript(t, Config{})
		s.env(31)
		s.do(31, OpOpen, inst, rd, enoent, 1)
		s.do(31, OpOpen, inst+".1407", excl, 3, 2)
		s.do(31, OpRename, inst+".1407", 0, 0, 3, inst)
		j, _ := s.c.Result(ResultInput{StartMono: 0, WallNS: int64(s.ts), FS: treeFS{dirs: tc.dirs}})
		if c := cacheIn(t, j, "python"); c.EntriesWritten != 1 || c.EntriesGone != tc.gone {
			t.Errorf("%s: %d written, %d gone, want %d gone", tc.name, c.EntriesWritten, c.EntriesGone, tc.gone)
		}
	}
}

// TestWeightsCacheReadIsAHit: without path syscalls, a first read of a
// file under a weights cache (pip's kept response, a torch.hub
// checkpoint) is that cache's hit; reading back what the run downloaded
// is not, and a compile cache's file (Triton's) is no such evidence.
func TestWeightsCacheReadIsAHit(t *testing.T) {
	s := newScript(t, Config{})
	s.env(40, "HOME=/h", "TRITON_CACHE_DIR=/t")
	seen := func(p string) {
		s.ts += 1e6
		s.c.CacheRead(probe.FileSeen{PID: 40, TID: 40, TS: s.ts, Path: p, Kind: probe.SeenFirst})
	}
	seen("/h/.cache/pip/http/7/f/7/a/0/7f7a")
	seen("/h/.cache/pip/http/7/f/7/a/0/7f7a") // one lookup per process and entry
	seen("/t/KEY/k.so")
	seen("/h/model.bin")
	j := s.result()
	if c := cacheIn(t, j, "pip"); counts(c) != "lookups 1 hits 1 misses 0 written 0" {
		t.Errorf("pip: %s", counts(c))
	}
	for _, c := range j.Caches {
		if c.Name == "triton" && c.Lookups != 0 {
			t.Errorf("triton: %s", counts(c))
		}
	}
}
