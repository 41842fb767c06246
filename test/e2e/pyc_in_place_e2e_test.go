package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBytecodeEntryBlockedByADirectoryIsNotKept: Python compiles a
// module whose .pyc path is a directory, writes its temporary .pyc and
// fails to rename it into place (unseen: the bytecode cache is told from
// page-cache records, without the path syscalls). That compile is not
// kept: it counts among the entries gone, and the directory's bytes are
// not counted as written. The other modules' entries are kept, their
// bytes those of the .pyc files on disk.
func TestBytecodeEntryBlockedByADirectoryIsNotKept(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	const modules = 4
	var imports string
	for i := range modules {
		src := fmt.Sprintf("VALUE = %d\n\ndef f(x):\n    return x * VALUE\n", i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%d.py", i)), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if imports != "" {
			imports += ", "
		}
		imports += fmt.Sprintf("m%d", i)
	}
	cacheDir := filepath.Join(dir, "__pycache__")
	tagOut, err := exec.Command("/usr/bin/python3", "-c", "import sys; print(sys.implementation.cache_tag)").Output()
	if err != nil {
		t.Fatalf("python's cache tag: %v", err)
	}
	tag := strings.TrimSpace(string(tagOut))
	blocked := filepath.Join(cacheDir, "m0."+tag+".pyc")
	// A directory with a file in it: its size must not count as written.
	if err := os.MkdirAll(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blocked, "filler"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run.rec")
	code, _, stderr := coldtrace(t, []string{"PYTHONPATH=" + dir, "PYTHONDONTWRITEBYTECODE=", "PYTHONPYCACHEPREFIX="}, "-q", "-o", out, "--",
		"/usr/bin/python3", "-c", "import "+imports)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	// The oracle: what Python left in the cache directory.
	var kept, keptBytes uint64
	for i := 1; i < modules; i++ {
		st, err := os.Lstat(filepath.Join(cacheDir, fmt.Sprintf("m%d.%s.pyc", i, tag)))
		if err != nil || !st.Mode().IsRegular() {
			t.Fatalf("m%d's bytecode was not written: %v", i, err)
		}
		kept++
		keptBytes += uint64(st.Size())
	}
	if st, err := os.Lstat(blocked); err != nil || !st.IsDir() {
		t.Fatalf("the blocking directory is gone: %v", err)
	}
	rec := readRecord(t, out)
	found := false
	for _, c := range rec.JIT.Caches {
		// Every __pycache__ beside its sources is one cache, named by
		// the pattern.
		if c.Name != "python" || c.Root != "**/__pycache__" {
			continue
		}
		found = true
		t.Logf("bytecode cache at %s: %d misses, %d written, %d gone, %d bytes written", c.Root, c.Misses, c.EntriesWritten, c.EntriesGone, c.BytesWritten)
		if c.EntriesWritten != kept+1 || c.EntriesGone != 1 {
			t.Errorf("%d entries written, %d gone: want %d written (one a failed rename), 1 gone", c.EntriesWritten, c.EntriesGone, kept+1)
		}
		if c.BytesWritten != keptBytes {
			t.Errorf("%d bytes written, want the %d bytes of the %d .pyc files kept", c.BytesWritten, keptBytes, kept)
		}
	}
	if !found {
		t.Fatalf("no in-tree bytecode cache in the record: %+v", rec.JIT.Caches)
	}
}

// TestBytecodeLookupsOfModulesOfEveryNameLength: modules whose source
// names are 4 to 11 bytes long (q.py … qqqqqqqq.py: the kernel tells a
// Python file by its name's last bytes, read whole or inline in the
// dentry), imported without bytecode: every source read is a lookup of
// the in-tree cache and a miss, none lost.
func TestBytecodeLookupsOfModulesOfEveryNameLength(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	var names []string
	for n := 1; n <= 8; n++ {
		name := strings.Repeat("q", n)
		if err := os.WriteFile(filepath.Join(dir, name+".py"), []byte("X = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	out := filepath.Join(t.TempDir(), "run.rec")
	code, _, stderr := coldtrace(t, []string{"PYTHONPATH=" + dir, "PYTHONDONTWRITEBYTECODE=", "PYTHONPYCACHEPREFIX="}, "-q", "-o", out, "--",
		"/usr/bin/python3", "-c", "import "+strings.Join(names, ", "))
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	rec := readRecord(t, out)
	for _, c := range rec.JIT.Caches {
		if c.Name != "python" || c.Root != "**/__pycache__" {
			continue
		}
		if c.Misses != uint64(len(names)) || c.Lookups != c.Hits+c.Misses {
			t.Errorf("%d lookups, %d hits, %d misses: want %d misses, each a lookup (a source read the kernel did not tell as Python is lost)",
				c.Lookups, c.Hits, c.Misses, len(names))
		}
		return
	}
	t.Fatalf("no in-tree bytecode cache in the record: %+v", rec.JIT.Caches)
}
