package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quietScript reads n plain files by absolute path, then every entry of
// the Triton cache its environment names, a .pyc in an in-tree
// __pycache__ and, relatively, one more entry; then a child process with
// another cache directory reads that one's entries at once.
const quietScript = `
import os, subprocess, sys
plain, n, child_cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def read(p):
    fd = os.open(p, os.O_RDONLY)
    os.read(fd, 64)
    os.close(fd)
for i in range(n):
    read(os.path.join(plain, "f%05d" % i))
cache = os.environ["TRITON_CACHE_DIR"]
for k in sorted(os.listdir(cache)):
    if k != "rel":
        read(os.path.join(cache, k, "kernel.json"))
read(os.path.join(plain, "__pycache__", "m.cpython-311.pyc"))
os.chdir(cache)
read("rel/kernel.json")
env = dict(os.environ, TRITON_CACHE_DIR=child_cache)
code = "import os\nfor k in sorted(os.listdir(os.environ['TRITON_CACHE_DIR'])):\n    fd = os.open(os.path.join(os.environ['TRITON_CACHE_DIR'], k, 'kernel.json'), os.O_RDONLY); os.close(fd)\n"
subprocess.run([sys.executable, "-c", code], env=env, check=True)
`

// writeByte creates a one-byte file at p, and its directories.
func writeByte(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// quietDir makes, under a new temporary directory, n one-byte plain files
// (dir/plain/f00000…) and the script; it returns the directory, the plain
// files' directory and the script's path.
func quietDir(t *testing.T, n int, name, script string) (dir, plain, scriptPath string) {
	t.Helper()
	dir = t.TempDir()
	plain = filepath.Join(dir, "plain")
	for i := 0; i < n; i++ {
		writeByte(t, filepath.Join(plain, fmt.Sprintf("f%05d", i)))
	}
	scriptPath = filepath.Join(dir, name)
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, plain, scriptPath
}

// TestJitQuietOpens: plain opens outside every cache stay in the kernel
// (few events reach user space), while every cache hit is still counted:
// entries read by absolute and relative paths, an in-tree .pyc, and the
// entries of a cache that only a child's new environment names, read as
// soon as it starts (before user space has seen its exec).
func TestJitQuietOpens(t *testing.T) {
	requireTracing(t)
	py := realPython(t)
	const n = 3000
	dir, plain, script := quietDir(t, n, "quiet.py", quietScript)
	mk := func(p string) { writeByte(t, p) }
	mk(filepath.Join(plain, "__pycache__", "m.cpython-311.pyc"))
	cache, child := filepath.Join(dir, "cache"), filepath.Join(dir, "child")
	const entries, childEntries = 20, 15
	for i := 0; i < entries; i++ {
		mk(filepath.Join(cache, fmt.Sprintf("k%02d", i), "kernel.json"))
	}
	mk(filepath.Join(cache, "rel", "kernel.json"))
	for i := 0; i < childEntries; i++ {
		mk(filepath.Join(child, fmt.Sprintf("c%02d", i), "kernel.json"))
	}
	cmd := []string{"env", "PYTHONDONTWRITEBYTECODE=1", "TRITON_CACHE_DIR=" + cache, py, script, plain, fmt.Sprint(n), child}
	rec, _ := jitRun(t, Options{Command: cmd})

	c := findCache(rec, "triton", cache)
	if c == nil || c.Hits != entries+1 || c.Misses != 0 {
		logJIT(t, rec)
		t.Fatalf("triton cache %s: %+v, want %d hits (absolute and relative), no misses", cache, c, entries+1)
	}
	c = findCache(rec, "triton", child)
	if c == nil || c.Hits != childEntries || c.Misses != 0 {
		logJIT(t, rec)
		t.Fatalf("triton cache %s of the child: %+v, want %d hits", child, c, childEntries)
	}
	c = findCache(rec, "python", "")
	if c == nil || c.Hits < 1 {
		logJIT(t, rec)
		t.Fatalf("python cache: %+v, want the in-tree .pyc read as a hit", c)
	}
	// Python's own startup opens some hundred files; the n plain reads
	// must not reach user space.
	if rec.Self.EventsSeen >= n/2 {
		t.Errorf("%d events reached user space for %d plain opens: the kernel filter let them through", rec.Self.EventsSeen, n)
	}
	t.Logf("events seen: %d (for %d plain opens)", rec.Self.EventsSeen, n)
}

// lateScript: a Python process with no framework in sight starts a child
// whose environment names a Triton cache (which attaches the path-syscall
// probes), waits for it, then reads n plain files.
const lateScript = `
import os, subprocess, sys, time
plain, n, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
subprocess.run([sys.executable, "-c", "pass"], env=dict(os.environ, TRITON_CACHE_DIR=cache), check=True)
time.sleep(0.5)
for i in range(n):
    fd = os.open(os.path.join(plain, "f%05d" % i), os.O_RDONLY)
    os.close(fd)
`

// TestJitQuietOpensAfterLateAttach: a process that executed before the
// path-syscall probes attached gets its verdict when they attach (it is
// held back until then, a system call saved per exec and fork), so its
// plain opens afterwards stay in the kernel.
func TestJitQuietOpensAfterLateAttach(t *testing.T) {
	requireTracing(t)
	py := realPython(t)
	const n = 3000
	dir, plain, script := quietDir(t, n, "late.py", lateScript)
	cache := filepath.Join(dir, "cache")
	rec, _ := jitRun(t, Options{Command: []string{"env", "PYTHONDONTWRITEBYTECODE=1", py, script, plain, fmt.Sprint(n), cache}})
	if rec.JIT == nil || !strings.Contains(rec.JIT.PathSyscalls, "TRITON_CACHE_DIR") {
		logJIT(t, rec)
		t.Fatal("path syscalls not attached for the child's TRITON_CACHE_DIR")
	}
	if rec.Self.EventsSeen >= n/2 {
		t.Errorf("%d events reached user space for %d plain opens after the late attach: the parent's verdict was not written", rec.Self.EventsSeen, n)
	}
	t.Logf("events seen: %d (for %d plain opens); path syscalls: %s", rec.Self.EventsSeen, n, rec.JIT.PathSyscalls)
}
