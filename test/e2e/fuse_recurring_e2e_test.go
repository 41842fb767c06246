package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/record"
)

// slowFUSE mounts testdata/workloads/fuseslow.py (2 ms per read, no
// kernel_cache) over a directory holding a 4 MiB file and returns the
// file's path through the mount and on local disk.
func slowFUSE(t *testing.T) (mounted, local string) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import fusepy").Run(); err != nil {
		t.Skipf("no fusepy for /usr/bin/python3 (Debian python3-fusepy): %v", err)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	// Not /tmp: a tmpfs there keeps the local file in memory.
	dir, err := os.MkdirTemp("/var/tmp", "coldtrace-fuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	back, mnt := filepath.Join(dir, "back"), filepath.Join(dir, "mnt")
	for _, d := range []string{back, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 4<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	local = filepath.Join(back, "model.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(back, "small.bin"), data[:1<<20], 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", workloadPath(t, "fuseslow.py"), back, mnt, "2")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Unmount(mnt, unix.MNT_DETACH)
		cancel()
		cmd.Wait()
	})
	mounted = filepath.Join(mnt, "model.bin")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, err := os.Stat(mounted); err == nil && st.Size() == int64(len(data)) {
			return mounted, local
		}
		if time.Now().After(deadline) {
			t.Fatalf("the FUSE fixture did not mount: %s", errb.String())
		}
	}
}

// fuseRun runs cat PATH under coldtrace and returns the record's file of
// that path, the summary's recurring reads and the verdict label.
func fuseRun(t *testing.T, path string) (record.File, []advice.RecurringRead, string) {
	t.Helper()
	dir := t.TempDir()
	rec, js := filepath.Join(dir, "r.rec"), filepath.Join(dir, "s.json")
	code, _, stderr := coldtrace(t, nil, "run", "-q", "-o", rec, "--json", js, "--", "cat", path)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	r := readRecord(t, rec)
	var file record.File
	for _, f := range r.Files {
		if f.Path == path {
			file = f
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Recurring []advice.RecurringRead `json:"recurring_reads"`
		Label     string                 `json:"label"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return file, s.Recurring, s.Label
}

// A file on a FUSE mount without kernel_cache is read from the daemon on
// every run: both runs read all of it, the file is marked fuse, the
// finding names it, and neither run is called cold by its reads. The
// same file read cold from local disk gets no such finding and is cold.
func TestFUSEReadsRecurOnEveryRun(t *testing.T) {
	requireTracing(t)
	mounted, local := slowFUSE(t)
	for run := 1; run <= 2; run++ {
		f, rr, label := fuseRun(t, mounted)
		if f.FS != "fuse" || f.BytesFromDisk < 4<<20 {
			t.Fatalf("run %d: file %+v, want fuse with 4 MiB read", run, f)
		}
		if len(rr) != 1 || rr[0].Path != mounted || rr[0].FS != "fuse" || rr[0].Bytes < 4<<20 ||
			!strings.Contains(rr[0].Sentence, "is read again on every run: FUSE drops its cached pages at open") {
			t.Fatalf("run %d: recurring reads %+v", run, rr)
		}
		if strings.Contains(label, "from disk") {
			t.Errorf("run %d: label %q counts the FUSE reads", run, label)
		}
	}
	fd, err := unix.Open(local, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Written pages are dirty: write them back so that they can be dropped.
	if err := unix.Fsync(fd); err != nil {
		t.Fatal(err)
	}
	unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
	unix.Close(fd)
	f, rr, label := fuseRun(t, local)
	if f.FS == "" || f.FS == "fuse" || len(rr) != 0 || !strings.Contains(label, "from disk") {
		t.Errorf("local file: fs %q, recurring %+v, label %q", f.FS, rr, label)
	}
}

// slowRun runs testdata/workloads/fuseload.py under coldtrace on the
// files named and returns the summary's slow-filesystem reads and the
// workload's output.
func slowRun(t *testing.T, eager, random string, mode ...string) ([]advice.SlowFSRead, string) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "s.json")
	args := append([]string{}, "run", "-q", "--json", js, "--", "/usr/bin/python3", workloadPath(t, "fuseload.py"), eager, random)
	args = append(args, mode...)
	code, out, stderr := coldtrace(t, nil, args...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		SlowFS []advice.SlowFSRead `json:"slow_fs_reads"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s.SlowFS, out
}

// An mmap loader with readahead cut (MADV_RANDOM, shuffled pages) on the
// 2 ms FUSE fixture fills 4 KiB per fault; the finding says so and quotes
// the speed-up of the run's own sequential read of that filesystem,
// within 2x of the one the workload measured. Reading both files eagerly
// gets no finding.
func TestSlowFilesystemFaultsQuoteTheMeasuredSpeedup(t *testing.T) {
	requireTracing(t)
	mounted, _ := slowFUSE(t)
	small := filepath.Join(filepath.Dir(mounted), "small.bin")
	s, out := slowRun(t, mounted, small)
	f := strings.Fields(out)
	if len(f) != 6 || f[4] != "ratio" {
		t.Fatalf("workload output %q", out)
	}
	measured, err := strconv.ParseFloat(f[5], 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[0].Path != small || s[0].FS != "fuse" || !s[0].Faults || s[0].FillBytes > 8<<10 || s[0].Fills < 128 ||
		s[0].SequentialPath != mounted || !strings.Contains(s[0].Sentence, small+" on fuse was filled by ") {
		t.Fatalf("slow filesystem reads %+v", s)
	}
	if s[0].Speedup < measured/2 || s[0].Speedup > measured*2 {
		t.Errorf("quoted speed-up %.1f, measured %.1f", s[0].Speedup, measured)
	}
	t.Logf("%s (measured %.1fx)", s[0].Sentence, measured)
	if s, _ := slowRun(t, mounted, small, "eager"); len(s) != 0 {
		t.Errorf("eager reads only: %+v", s)
	}
}
