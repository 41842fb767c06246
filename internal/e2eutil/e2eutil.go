// Package e2eutil holds the helpers of the tests that run coldtrace as a
// program (test/e2e, and cmd/coldtrace's tests of its test binary run as
// coldtrace): running it, and files whose page-cache state the tests set
// and check (evicted, resident, warmed up).
package e2eutil

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Run runs bin with args and the environment plus env, and returns its
// exit code, stdout and stderr; a program that cannot be started fails
// the test.
func Run(t testing.TB, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", bin, err)
	}
	return code, out.String(), errb.String()
}

// EvictableFile writes a file of size bytes of random-ish data in a
// directory whose page cache can be dropped (not tmpfs) and evicts it.
func EvictableFile(t testing.TB, size int64) string {
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
	Evict(t, path)
	return path
}

// Evict drops path's pages from the page cache (POSIX_FADV_DONTNEED).
func Evict(t testing.TB, path string) {
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

// ResidentPages counts the pages of path in the page cache (mincore), the
// ground truth the counts are checked against.
func ResidentPages(t testing.TB, path string) int {
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

// CachedOrReclaimed counts the pages of path in the page cache and those
// reclaim took out of it that the kernel still remembers (cachestat(2)'s
// shadow entries). After a run that read a whole file, their sum is the
// pages that run brought in: memory pressure or DAMON may page some out
// again before the test looks, and an eviction by fadvise leaves no
// shadow, so the sum does not count pages gone before the run.
func CachedOrReclaimed(t testing.TB, path string) (cached, reclaimed uint64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cs unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0); err != nil {
		t.Fatalf("cachestat %s: %v", path, err)
	}
	return cs.Cache, cs.Evicted
}

// WarmUp reads path until the page cache holds all of it: DAMON may page
// out idle file pages between two runs on these machines.
func WarmUp(t testing.TB, path string) {
	t.Helper()
	for range 3 {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if ResidentPages(t, path) == (len(data)+os.Getpagesize()-1)/os.Getpagesize() {
			return
		}
	}
	t.Fatalf("%s does not stay in the page cache", path)
}

// DiskDir is a directory on a disk-backed filesystem, whose pages can be
// evicted (page-cache residency on tmpfs means nothing): the test's
// temporary directory, or one under /var/tmp when that is tmpfs.
func DiskDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC && st.Type != unix.RAMFS_MAGIC {
		return d
	}
	dir, err := os.MkdirTemp("/var/tmp", "coldtrace-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := unix.Statfs(dir, &st); err != nil || st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		t.Skip("no disk-backed directory: TMPDIR and /var/tmp are tmpfs, whose pages cannot be evicted")
	}
	return dir
}

// OpenToAll makes dir and the directories above it searchable by every
// user, up to the temporary directory or /var/tmp (left as they are), so
// that tests may act on files there as other users.
func OpenToAll(t testing.TB, dir string) {
	t.Helper()
	for d := dir; d != "/" && d != os.TempDir() && d != "/var/tmp"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
