package trace

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestJitExecFromLongPath: a program executed from a path longer than 255
// bytes is known by its whole name. Named like a library that uses a
// kernel cache (libnvrtc*), it attaches the path-syscall probes; a name
// cut inside a directory of its path (at 255 bytes, as it was) would not.
func TestJitExecFromLongPath(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	for _, c := range "abc" {
		dir = filepath.Join(dir, strings.Repeat(string(c), 120))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "libnvrtc-names")
	truePath := "/bin/true"
	if err := os.Symlink(truePath, prog); err != nil {
		t.Fatal(err)
	}
	if len(prog) <= 360 {
		t.Fatalf("the program's path is %d bytes, want over 360", len(prog))
	}
	// Python's bytecode cache afterwards, so that the run has a JIT
	// section to say when the path syscalls were attached.
	py := realPython(t)
	prefix := filepath.Join(t.TempDir(), "pycache")
	script := "'" + prog + "'; sleep 0.1; env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=" + prefix + " " + py + " -c 'import json'"
	rec, _ := jitRun(t, Options{Command: []string{"sh", "-c", script}, JITSyscalls: JITSyscallsAuto})
	if rec.JIT == nil || !strings.Contains(rec.JIT.PathSyscalls, "used libnvrtc-names") {
		logJIT(t, rec)
		t.Fatalf("exec of %s (%d bytes) did not attach the path syscalls: %+v", prog, len(prog), rec.JIT)
	}
	t.Logf("path syscalls: %s", rec.JIT.PathSyscalls)
}

// TestJitCacheUnderLongPath: a kernel cache whose root is a path of some
// 1,000 bytes (past the 512 its path copies once held) is seen whole: the
// Triton-like workload's cold run misses and writes an entry, its warm
// run hits it.
func TestJitCacheUnderLongPath(t *testing.T) {
	requireTracing(t)
	requireCC(t)
	py := realPython(t)
	script, _ := filepath.Abs("../testdata/jit/triton_like.py")
	cache := t.TempDir()
	for _, c := range "abcdefgh" {
		cache = filepath.Join(cache, strings.Repeat(string(c), 120))
	}
	cache = filepath.Join(cache, "triton-cache")
	if len(cache) < 1000 {
		t.Fatalf("the cache root is %d bytes, want 1,000 or more", len(cache))
	}
	cmd := []string{"env", "TRITON_CACHE_DIR=" + cache, py, script, "1", "120"}
	for _, warm := range []bool{false, true} {
		rec, _ := jitRun(t, Options{Command: cmd})
		c := findCache(rec, "triton", cache)
		if c == nil {
			logJIT(t, rec)
			t.Fatalf("warm %v: no triton cache at the %d-byte root", warm, len(cache))
		}
		if !warm && (c.Misses < 1 || c.Hits != 0 || c.EntriesWritten < 1) {
			t.Errorf("cold run: triton %+v, want ≥1 miss, 0 hits, an entry written", *c)
		}
		if warm && (c.Hits < 1 || c.Misses != 0 || c.EntriesWritten != 0) {
			t.Errorf("warm run: triton %+v, want ≥1 hit, 0 misses, nothing written", *c)
		}
	}
}

// TestJitBytecodeKeysByteExact: Python's bytecode cache under a root
// whose name is not UTF-8, filled from a source directory whose
// 255-byte name is not UTF-8 either (the entry's key holds it whole; a
// 255-byte .pyc name itself cannot be written: Python's temporary name
// beside it is longer): the cache's root and its missed, written and
// hit keys are the entries' exact bytes, in the record and through its
// file, whether the page cache or the path syscalls told them.
func TestJitBytecodeKeysByteExact(t *testing.T) {
	requireTracing(t)
	py := realPython(t)
	tag, err := exec.Command(py, "-c", "import sys; print(sys.implementation.cache_tag)").Output()
	if err != nil {
		t.Skipf("python3 has no cache tag: %v", err)
	}
	suffix := "." + strings.TrimSpace(string(tag)) + ".pyc"
	mod := "bytes_exact_module"
	dirName := "src\xe9" + strings.Repeat("d", 255-len("src\xe9"))
	for _, mode := range []string{JITSyscallsAuto, JITSyscallsAlways} {
		base := t.TempDir()
		prefix, src := filepath.Join(base, "pyc\xff\xfe cache"), filepath.Join(base, dirName)
		if err := os.Mkdir(src, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, mod+".py"), []byte("X = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		key := strings.TrimPrefix(src, "/") + "/" + mod + suffix
		// A second module's entry is a directory: its lookups and its
		// write fail (EISDIR), which the path syscalls see.
		if err := os.WriteFile(filepath.Join(src, "blocked.py"), []byte("Y = 2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(prefix, strings.TrimPrefix(src, "/"), "blocked"+suffix), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := []string{"env", "-u", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX=" + prefix, "PYTHONPATH=" + src,
			py, "-c", "import " + mod + ", blocked"}
		for _, warm := range []bool{false, true} {
			rec, _ := jitRun(t, Options{Command: cmd, JITSyscalls: mode})
			c := findCache(rec, "python", prefix)
			if c == nil {
				logJIT(t, rec)
				t.Fatalf("%s warm %v: no python cache at %q", mode, warm, prefix)
			}
			want := map[bool][]*[]string{false: {&c.MissedKeys, &c.WrittenKeys}, true: {&c.HitKeys}}[warm]
			for _, keys := range want {
				if !slices.Contains(*keys, key) {
					t.Errorf("%s warm %v: %d keys, none %q (missed %q, written %q, hit %q of the module)", mode, warm, len(*keys), key,
						ofModule(c.MissedKeys, mod), ofModule(c.WrittenKeys, mod), ofModule(c.HitKeys, mod))
				}
			}
			// Through the record's file, byte for byte.
			var buf bytes.Buffer
			if err := record.Encode(&buf, rec); err != nil {
				t.Fatal(err)
			}
			back, err := record.Decode(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if b := findCache(back, "python", prefix); b == nil || !slices.Equal(b.MissedKeys, c.MissedKeys) ||
				!slices.Equal(b.WrittenKeys, c.WrittenKeys) || !slices.Equal(b.HitKeys, c.HitKeys) ||
				!slices.EqualFunc(b.Failures, c.Failures, func(x, y record.CacheFailure) bool { return x.Path == y.Path }) {
				t.Errorf("%s warm %v: the record's file does not give the cache back: %+v", mode, warm, b)
			}
			if mode == JITSyscallsAlways && !slices.ContainsFunc(c.Failures, func(f record.CacheFailure) bool {
				return strings.Contains(f.Path, "/"+dirName+"/blocked"+suffix)
			}) {
				t.Errorf("%s warm %v: no failure under the blocked entry's whole name: %+v", mode, warm, c.Failures)
			}
		}
	}
}

// ofModule are the keys that name module mod.
func ofModule(keys []string, mod string) []string {
	var out []string
	for _, k := range keys {
		if strings.Contains(k, mod) {
			out = append(out, k)
		}
	}
	return out
}
