package main

// Helpers for the tests here that run this test binary as coldtrace
// (TestMain): those that hold it at a point of its run, call its
// functions in this process, or run its residency commands. Tests of the
// built binary alone live in test/e2e.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/internal/testenv"
)

// summaryJSON is the part of the JSON summary the tests here read.
type summaryJSON struct {
	Schema   string `json:"schema"`
	ExitCode int    `json:"exit_code"`
}

// requireTracing skips tests that need to load eBPF programs, saying why.
func requireTracing(t *testing.T) {
	t.Helper()
	testenv.RequireTracing(t)
}

// coldtrace runs the test binary as coldtrace with args and returns its
// exit code, stdout and stderr.
func coldtrace(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asMainEnv+"=1"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run coldtrace: %v", err)
	}
	return code, out.String(), errb.String()
}

// evictableFile writes a file of size bytes of random-ish data in a
// directory whose page cache can be dropped (not tmpfs) and evicts it.
func evictableFile(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs: its pages cannot be evicted; set TMPDIR to a disk-backed directory", dir)
	}
	path := filepath.Join(dir, "data.bin")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>8)
	}
	for written := int64(0); written < size; written += int64(len(buf)) {
		buf[0]++
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	evict(t, path)
	return path
}

func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("evict %s: %v", path, err)
	}
}

// residentPages counts the pages of path in the page cache (mincore), the
// ground truth the counts are checked against.
func residentPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// warmUp reads path until the page cache holds all of it: DAMON may page
// out idle file pages between two runs on these machines.
func warmUp(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if residentPages(t, path) == (len(data)+os.Getpagesize()-1)/os.Getpagesize() {
			return
		}
	}
	t.Fatalf("%s does not stay in the page cache", path)
}

// bpfFDs lists this process's file descriptors that hold BPF objects or
// perf events (classic tracepoints and uprobes attach through them).
func bpfFDs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own fd, closed by now
		}
		if strings.HasPrefix(target, "anon_inode:bpf") || target == "anon_inode:[perf_event]" {
			found = append(found, e.Name()+" -> "+target)
		}
	}
	return found
}

func readSummary(t *testing.T, path string) summaryJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("summary not written: %v", err)
	}
	var s summaryJSON
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, b)
	}
	schematest.Validate(t, docSummary.Name, b)
	if s.Schema != "coldtrace.summary/v1" {
		t.Fatalf("schema %q", s.Schema)
	}
	return s
}

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s never appeared; stderr: %s", path, stderr.String())
		}
	}
}
