package pagecache_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace"
)

// The files the name tests read: more than the small-file bound (256
// KiB) so that each has an entry of its own from its first read, and a
// partial last page.
const (
	nameFileBytes = 320<<10 + 123
	nameFilePages = (nameFileBytes + 4095) / 4096
)

// nameCase is one file the name tests make: its path relative to the
// test's directory.
type nameCase struct {
	what string
	rel  string
}

// deepRel is levels directories of a width-byte name each, then leaf.
func deepRel(levels, width int, leaf string) string {
	parts := make([]string, 0, levels+1)
	for i := range levels {
		parts = append(parts, strings.Repeat(string(rune('a'+i%26)), width))
	}
	return filepath.Join(append(parts, leaf)...)
}

// nameCases are the shapes of name the walk must copy whole; base is the
// directory they go in, which the near-PATH_MAX path fills up to 4,000
// bytes.
func nameCases(base string) []nameCase {
	hex := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	near := 4000 - len(base) - 1 - len("near")
	cases := []nameCase{
		{"64-hex sha256 blob", filepath.Join("blobs", hex)},
		{"255-byte name", strings.Repeat("n", 251) + ".bin"},
		{"20 levels of 100-byte names", deepRel(20, 100, "leaf")},
		{"600 levels of 4-byte names", deepRel(600, 4, "leaf")},
		{"not UTF-8", "caf\xe9-\xff\xfe.bin"},
		{"a newline", "line one\nline two"},
	}
	// Directories of 100 bytes, then one that tops the path up to 4,000.
	levels := near / 101
	if near-levels*101 < 2 {
		levels--
	}
	last := near - levels*101 - 1
	rel := deepRel(levels, 100, strings.Repeat("z", last))
	cases = append(cases, nameCase{"a 4,000-byte path", filepath.Join(rel, "near")})
	return cases
}

// writeNameFile writes the test's data to path, creating its directories,
// and syncs it so that its pages can be evicted.
func writeNameFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, nameFileBytes)
	for i := range data {
		data[i] = byte(i * 13)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// evictNameFile drops fd's pages (posix_fadvise DONTNEED) and checks with
// mincore that none stay.
func evictNameFile(t *testing.T, fd int) {
	t.Helper()
	m, err := unix.Mmap(fd, 0, nameFileBytes, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, nameFilePages)
	for try := 0; try < 3; try++ {
		if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatalf("evict: %v", err)
		}
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatalf("mincore: %v", errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		if n == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("pages stay cached after eviction")
}

func evictPath(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evictNameFile(t, int(f.Fd()))
}

// traceRun runs command under trace.Run and returns its record.
func traceRun(t *testing.T, command []string) *record.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := trace.Run(ctx, trace.Options{Command: command, NoGPU: true, NoJIT: true, Actor: self,
		Stdin: devnull, Stdout: devnull, Stderr: os.Stderr})
	if err != nil {
		t.Fatalf("trace %q: %v", command, err)
	}
	if rec.ExitCode != 0 {
		t.Fatalf("%q exited %d", command, rec.ExitCode)
	}
	if rec.Lost.Total() != 0 {
		t.Errorf("lost events: %+v", rec.Lost)
	}
	return rec
}

// recordFileByIno finds the record's entry of the file with inode ino.
func recordFileByIno(rec *record.Record, ino uint64) (record.File, bool) {
	for _, f := range rec.Files {
		if f.Ino == ino {
			return f, true
		}
	}
	return record.File{}, false
}

func inoOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestWholeNamesByteExact: files named by a 64-hex sha256, a 255-byte
// name, deep paths (20 levels of 100-byte names; 600 levels; one of
// 4,000 bytes), a name that is not UTF-8 and one with a newline, read
// cold by one cat: the record names each with every byte, not cut, its
// pages read and missed equal to its size, and keeps the bytes through
// Encode and Decode.
func TestWholeNamesByteExact(t *testing.T) {
	testenv.RequireTracing(t)
	base := e2eutil.DiskDir(t)
	cases := nameCases(base)
	var paths []string
	for _, c := range cases {
		p := filepath.Join(base, c.rel)
		writeNameFile(t, p)
		evictPath(t, p)
		paths = append(paths, p)
	}
	if n := len(filepath.Join(base, cases[len(cases)-1].rel)); n != 4000 {
		t.Fatalf("the near-PATH_MAX path is %d bytes, want 4000", n)
	}
	rec := traceRun(t, append([]string{"cat"}, paths...))
	rec = roundTrip(t, rec)
	for i, c := range cases {
		f, ok := recordFileByIno(rec, inoOf(t, paths[i]))
		if !ok {
			t.Errorf("%s: no entry in the record", c.what)
			continue
		}
		if f.Path != paths[i] || f.NameCut {
			t.Errorf("%s: path %q (%d bytes, cut %v), want %q (%d bytes)", c.what, f.Path, len(f.Path), f.NameCut, paths[i], len(paths[i]))
		}
		if f.SizeBytes != nameFileBytes || f.PagesAccessed != nameFilePages || f.PagesMissed-f.PagesReread != nameFilePages {
			t.Errorf("%s: size %d, pages accessed %d, missed %d (re-read %d); want %d bytes, %d pages each",
				c.what, f.SizeBytes, f.PagesAccessed, f.PagesMissed, f.PagesReread, nameFileBytes, nameFilePages)
		}
	}
}

// TestPathOverPathMaxFlaggedCut: a file whose path is longer than
// PATH_MAX (reached by relative opens) is read whole, and its record
// entry says its name is cut instead of naming a file that is not it.
func TestPathOverPathMaxFlaggedCut(t *testing.T) {
	testenv.RequireTracing(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: it reads the file by relative opens")
	}
	base := e2eutil.DiskDir(t)
	rel := deepRel(42, 100, "over")
	dirfd, err := unix.Open(base, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(rel, "/")
	for _, d := range parts[:len(parts)-1] {
		if err := unix.Mkdirat(dirfd, d, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(dirfd, d, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		unix.Close(dirfd)
		if err != nil {
			t.Fatal(err)
		}
		dirfd = next
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, "over", unix.O_CREAT|unix.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	data := make([]byte, nameFileBytes)
	if _, err := unix.Write(fd, data); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fsync(fd); err != nil {
		t.Fatal(err)
	}
	evictNameFile(t, fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	script := "import os, sys\nos.chdir(sys.argv[1])\nfor d in sys.argv[2].split('/')[:-1]: os.chdir(d)\n" +
		"f = open('over', 'rb')\nwhile f.read(1 << 16): pass\n"
	rec := traceRun(t, []string{py, "-c", script, base, rel})
	f, ok := recordFileByIno(rec, st.Ino)
	if !ok {
		t.Fatal("the file over PATH_MAX has no entry in the record")
	}
	if !f.NameCut || strings.HasPrefix(f.Path, "/") {
		t.Errorf("path %q (%d bytes), cut %v: want a cut name (the path is %d bytes)", f.Path, len(f.Path), f.NameCut, len(base)+1+len(rel))
	}
	if f.PagesMissed-f.PagesReread != nameFilePages {
		t.Errorf("pages missed %d (re-read %d), want %d", f.PagesMissed, f.PagesReread, nameFilePages)
	}
}

// roundTrip is rec after Encode and Decode.
func roundTrip(t *testing.T, rec *record.Record) *record.Record {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.ctrace")
	if err := record.WriteFile(path, rec); err != nil {
		t.Fatal(err)
	}
	got, err := record.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
