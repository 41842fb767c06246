package main

// Records made to cost: a small file that would decode into gigabytes,
// a million files whose ids are not their positions, and files sharing
// an id. report must refuse the first two cheaply or render them in
// bounded time, and name what it refuses.

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/record"
)

// spawnRSS starts a program from a small process and prints its peak
// resident memory (KiB) on fd 3. The kernel carries the memory high-water
// mark of the address space an exec replaces into the new program's
// ru_maxrss: exec'd straight from this test process (hundreds of MiB after
// the million-file test) the child would be charged with the test's peak.
const spawnRSS = `import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, ru = os.wait4(pid, 0)
os.write(3, str(ru.ru_maxrss).encode())
sys.exit(os.waitstatus_to_exitcode(status))
`

// reportRun runs `coldtrace report PATH` with stdout to /dev/null and
// returns its exit code, stderr and peak resident memory.
func reportRun(t *testing.T, limit time.Duration, path string) (int, string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("python3 measures the report's memory: %v", err)
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	cmd := exec.CommandContext(ctx, py, "-c", spawnRSS, os.Args[0], "report", path)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.ExtraFiles = []*os.File{wr}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	wr.Close()
	if ctx.Err() != nil {
		t.Fatalf("report %s still ran after %v", path, limit)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(rd)
	kib, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	return code, errb.String(), kib << 10
}

// TestReportRefusesEmptyFileBomb: 10 million empty file objects (30 MB
// of JSON, a gzip of some 30 KB) are refused by report with an error
// naming the bound on files, and the process never holds 200 MiB.
func TestReportRefusesEmptyFileBomb(t *testing.T) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write([]byte(`{"schema":"coldtrace.record/v1","command":["x"],"files":[{}`))
	chunk := bytes.Repeat([]byte(",{}"), 1<<16)
	for n := 1; n < 10_000_000; n += 1 << 16 {
		zw.Write(chunk)
	}
	zw.Write([]byte("]}"))
	zw.Close()
	path := filepath.Join(t.TempDir(), "bomb.rec")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stderr, rss := reportRun(t, 2*time.Minute, path)
	if code == 0 || !strings.Contains(stderr, "files holds more than 2097152 entries") || !strings.Contains(stderr, "record.MaxFiles") {
		t.Errorf("report of %d compressed bytes of empty files: exit %d, stderr %q; want the bound on files named", buf.Len(), code, stderr)
	}
	if rss == 0 || rss > 200<<20 {
		t.Errorf("report peaked at %d MiB resident, want under 200 MiB", rss>>20)
	}
	t.Logf("%d bytes compressed: refused at %.1f MiB resident", buf.Len(), float64(rss)/(1<<20))
}

// shuffledFilesRecord writes a record of n files whose ids are a
// permutation without fixed points, with one sample naming each.
func shuffledFilesRecord(t *testing.T, path string, n int) {
	t.Helper()
	ids := rand.New(rand.NewSource(2)).Perm(n)
	for i := range ids {
		if ids[i] == i {
			j := (i + 1) % n
			ids[i], ids[j] = ids[j], ids[i]
		}
	}
	r := &record.Record{Schema: record.Schema, Command: []string{"big"}, WallNS: 2e9, IntervalNS: 1e8,
		Host: record.Host{PageSize: 4096, CPUs: 2}}
	r.Files = make([]record.File, n)
	s := record.Sample{EndNS: 2e9}
	for i := range r.Files {
		r.Files[i] = record.File{ID: ids[i], Dev: 8 << 20, Ino: uint64(1000 + i), Path: fmt.Sprintf("/data/set/%07d.bin", ids[i]),
			SizeBytes: 1 << 16, PagesAccessed: 16, PagesMissed: uint64(i % 17), BytesFromDisk: uint64(i%17) << 12,
			IOWaitNS: int64(i % 1000), MissCPUNS: int64(i % 300)}
		s.Files = append(s.Files, record.FileDelta{File: ids[i], PagesAccessed: 16, PagesMissed: uint64(i % 17),
			IOWaitNS: int64(i % 1000), MissCPUNS: int64(i % 300)})
	}
	r.Threads = []record.Thread{{TID: 10, PID: 10, Comm: "big", CPUNS: 1e9, OffCPUNS: 1e9, IOWaitNS: 5e8}}
	r.Processes = []record.Process{{PID: 10, Comm: "big", Threads: 1, CPUNS: 1e9, OffCPUNS: 1e9, IOWaitNS: 5e8, Exited: true, EndNS: 2e9}}
	s.Threads = []record.ThreadDelta{{TID: 10, PID: 10, CPUNS: 1e9, IOWaitNS: 5e8, OtherWaitNS: 5e8}}
	r.Samples = []record.Sample{s}
	if err := record.WriteFile(path, r); err != nil {
		t.Fatal(err)
	}
}

// TestReportRendersMillionShuffledFiles: a record of 10^6 files whose ids
// are not their positions renders (it took over 300 s when each lookup
// by id searched the files); the time limit is generous on purpose.
func TestReportRendersMillionShuffledFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("a record of a million files: not in -short")
	}
	path := filepath.Join(t.TempDir(), "shuffled.rec")
	shuffledFilesRecord(t, path, 1_000_000)
	code, stderr, _ := reportRun(t, 10*time.Minute, path)
	if code != 0 {
		t.Errorf("report of a million shuffled files: exit %d, stderr %q", code, stderr)
	}
}

// TestReportRefusesDuplicateFileIDs: two files with one id make a corrupt
// record, refused by report with the ids named.
func TestReportRefusesDuplicateFileIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dup.rec")
	text := `{"schema":"coldtrace.record/v1","command":["x"],"files":[{"id":1,"path":"/a"},{"id":0,"path":"/b"},{"id":1,"path":"/c"}]}`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stderr, _ := reportRun(t, time.Minute, path)
	if code == 0 || !strings.Contains(stderr, "files[0] and files[2] both have id 1") {
		t.Errorf("report of files sharing an id: exit %d, stderr %q", code, stderr)
	}
}
