package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
)

// requireTracing skips tests that need to load eBPF programs, saying why.
func requireTracing(t *testing.T) {
	t.Helper()
	testenv.RequireTracing(t)
}

// coldtrace runs the coldtrace binary with args and returns its
// exit code, stdout and stderr.
func coldtrace(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	return e2eutil.Run(t, ctBin, env, args...)
}

type summaryJSON struct {
	Schema     string `json:"schema"`
	ExitCode   int    `json:"exit_code"`
	WallNS     int64  `json:"wall_ns"`
	LostEvents uint64 `json:"lost_events"`
	Files      []struct {
		Path          string `json:"path"`
		PagesAccessed uint64 `json:"pages_accessed"`
		PagesMissed   uint64 `json:"pages_missed"`
		BytesFromDisk uint64 `json:"bytes_from_disk"`
		IOWaitNS      int64  `json:"io_wait_ns"`
		MissCPUNS     int64  `json:"miss_cpu_ns"`
		FillWaitNS    int64  `json:"fill_wait_ns"`
	} `json:"files"`
	Processes []struct {
		PID      int32  `json:"pid"`
		Comm     string `json:"comm"`
		CPUNS    int64  `json:"cpu_ns"`
		OffCPUNS int64  `json:"offcpu_ns"`
		IOWaitNS int64  `json:"io_wait_ns"`
	} `json:"processes"`
	Breakdown []struct {
		Category string `json:"category"`
		NS       int64  `json:"ns"`
	} `json:"breakdown"`
	Phases []struct {
		StartNS  int64  `json:"start_ns"`
		EndNS    int64  `json:"end_ns"`
		Dominant string `json:"dominant"`
	} `json:"phases"`
	Machine *struct {
		OthersCPUNS int64 `json:"others_cpu_ns"`
		OthersCount int   `json:"others_count"`
		StealNS     int64 `json:"steal_ns"`
	} `json:"machine"`
	Verdict      string `json:"verdict"`
	BrokenCaches []struct {
		Cache string `json:"cache"`
	} `json:"broken_caches"`
}

// onlyDownload is rec's one download; the test stops when it has not
// exactly one.
func onlyDownload(t *testing.T, rec *record.Record) record.Download {
	t.Helper()
	if len(rec.Downloads) != 1 {
		t.Fatalf("%d downloads, want 1: %+v", len(rec.Downloads), rec.Downloads)
	}
	return rec.Downloads[0]
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

func (s summaryJSON) category(name string) int64 {
	for _, r := range s.Breakdown {
		if r.Category == name {
			return r.NS
		}
	}
	return -1
}

// buildC compiles a workload from testdata/workloads.
func buildC(t *testing.T, name string, extra ...string) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) to build the workload")
	}
	out := filepath.Join(t.TempDir(), name)
	args := append([]string{"-O2", "-o", out, filepath.Join("..", "..", "testdata", "workloads", name+".c")}, extra...)
	if b, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", name, err, b)
	}
	return out
}

// fileEntry gives a file's page counts and what filling its pages cost
// the run: I/O wait plus fill CPU.
func fileEntry(t *testing.T, s summaryJSON, path string) (accessed, missed uint64, fillNS int64) {
	t.Helper()
	for _, f := range s.Files {
		if f.Path == path {
			return f.PagesAccessed, f.PagesMissed, f.IOWaitNS + f.MissCPUNS
		}
	}
	t.Fatalf("%s not among the %d files of the summary", path, len(s.Files))
	return
}

const filePages = 256 << 20 >> 12 // 65,536 pages of 4 KiB

func checkColdWarm(t *testing.T, reader ...string) {
	path := e2eutil.EvictableFile(t, 256<<20)
	if n := e2eutil.ResidentPages(t, path); n > filePages/100 {
		t.Fatalf("after eviction %d pages are still cached", n)
	}
	out := filepath.Join(t.TempDir(), "s.json")
	args := append([]string{"-q", "--json", out, "--"}, reader...)
	args = append(args, path)

	code, _, stderr := coldtrace(t, nil, args...)
	if code != 0 {
		t.Fatalf("cold run exit %d: %s", code, stderr)
	}
	s := readSummary(t, out)
	acc, missed, fill := fileEntry(t, s, path)
	t.Logf("cold: accessed %d, missed %d, io wait + fill CPU %v", acc, missed, time.Duration(fill))
	if missed < filePages*95/100 || missed > filePages*105/100 {
		t.Errorf("cold: pages_missed %d, want within 5%% of %d", missed, filePages)
	}
	// Not the I/O wait alone: this VM's disk often keeps ahead of
	// readahead, and a cold 256 MiB cat then waits 0.7–34 ms, or not at
	// all (seen in CI); the fill CPU is most of a cold read here
	// (113–435 ms). 10 ms is 150 ns a page inserted: less than any
	// kernel takes.
	if fill < 10e6 {
		t.Errorf("cold: io_wait_ns + miss_cpu_ns %v, want ≥ 10ms", time.Duration(fill))
	}
	if s.LostEvents != 0 {
		t.Errorf("cold: %d lost events", s.LostEvents)
	}
	// The pages the run brought in are those cached now plus those
	// reclaim took out since (one CI run: 60,911 of 65,536 still cached).
	if cached, reclaimed := e2eutil.CachedOrReclaimed(t, path); cached+reclaimed < missed*95/100 {
		t.Errorf("cold run missed %d pages but only %d are cached after it and %d were reclaimed", missed, cached, reclaimed)
	}

	// DAMON can page part of the file out between the warm-up and the
	// run (it did in about 1 of 10 runs after a long benchmark): one more
	// try is allowed, never more.
	for try := 1; ; try++ {
		e2eutil.WarmUp(t, path)
		code, _, stderr = coldtrace(t, nil, args...)
		if code != 0 {
			t.Fatalf("warm run exit %d: %s", code, stderr)
		}
		s = readSummary(t, out)
		acc, missed, _ = fileEntry(t, s, path)
		t.Logf("warm (try %d): accessed %d, missed %d", try, acc, missed)
		if acc > 0 && missed*100 <= acc {
			return
		}
		if try == 2 {
			t.Errorf("warm: pages_missed %d of %d accessed, want ≤ 1%%", missed, acc)
			return
		}
	}
}

func TestColdWarmRead(t *testing.T) {
	requireTracing(t)
	checkColdWarm(t, "cat")
}

func TestColdWarmMmap(t *testing.T) {
	requireTracing(t)
	checkColdWarm(t, buildC(t, "mmapread"))
}

func TestGrandchildIsTracked(t *testing.T) {
	requireTracing(t)
	path := e2eutil.EvictableFile(t, 16<<20)
	out := filepath.Join(t.TempDir(), "s.json")
	code, _, stderr := coldtrace(t, nil, "-q", "--json", out, "--", "sh", "-c", fmt.Sprintf(`sh -c "cat %s > /dev/null"`, path))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s := readSummary(t, out)
	_, missed, _ := fileEntry(t, s, path)
	if missed < 16<<20>>12*95/100 {
		t.Errorf("grandchild's read: %d pages missed, want ~%d", missed, 16<<20>>12)
	}
	comms := map[string]int{}
	for _, p := range s.Processes {
		comms[p.Comm]++
	}
	if comms["sh"] < 2 || comms["cat"] != 1 {
		t.Errorf("processes %v: want two sh and one cat", comms)
	}
}

func TestExitCodes(t *testing.T) {
	requireTracing(t)
	for _, tc := range []struct {
		name string
		cmd  []string
		want int
	}{
		{"success", []string{"true"}, 0},
		{"failure", []string{"sh", "-c", "exit 7"}, 7},
		{"not found", []string{"coldtrace-no-such-command"}, 127},
		{"killed", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "s.json")
			code, _, stderr := coldtrace(t, nil, append([]string{"-q", "--json", out, "--"}, tc.cmd...)...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.want, stderr)
			}
			if s := readSummary(t, out); s.ExitCode != tc.want {
				t.Errorf("summary exit_code %d, want %d", s.ExitCode, tc.want)
			}
			if tc.want == 127 && !strings.Contains(stderr, "coldtrace-no-such-command") {
				t.Errorf("stderr does not name the command: %q", stderr)
			}
		})
	}
}

func TestStdioPassesThrough(t *testing.T) {
	requireTracing(t)
	cmd := exec.Command(ctBin, "-q", "--", "sh", "-c", "read x; echo out:$x; echo err:$x >&2")
	cmd.Env = os.Environ()
	cmd.Stdin = strings.NewReader("hello\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if out.String() != "out:hello\n" || errb.String() != "err:hello\n" {
		t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
	}
}

func TestSIGINTIsForwarded(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "got-int")
	ready := filepath.Join(dir, "ready")
	out := filepath.Join(dir, "s.json")
	rec := filepath.Join(dir, "r.ctrace")
	script := fmt.Sprintf(`trap 'echo int > %s; exit 42' INT; touch %s; while :; do sleep 0.05; done`, marker, ready)
	cmd := exec.Command(ctBin, "-q", "--json", out, "-o", rec, "--", "sh", "-c", script)
	cmd.Env = os.Environ()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("command never started: %s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 42 {
		t.Fatalf("coldtrace ended with %v, want exit 42 from the command's trap; stderr: %s", err, errb.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the command did not see SIGINT: %v", err)
	}
	if s := readSummary(t, out); s.ExitCode != 42 {
		t.Errorf("summary exit_code %d", s.ExitCode)
	}
	r, err := record.ReadFile(rec)
	if err != nil {
		t.Fatalf("record after SIGINT: %v", err)
	}
	if !r.Interrupted {
		t.Errorf("record does not say it was interrupted")
	}
}

func TestRunsAsSudoUser(t *testing.T) {
	requireTracing(t)
	code, stdout, stderr := coldtrace(t, []string{"SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody"}, "-q", "--", "sh", "-c", "id -u; id -g; echo $HOME")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Fields(stdout)
	if len(lines) < 2 || lines[0] != "65534" || lines[1] != "65534" {
		t.Fatalf("id printed %q, want uid and gid 65534", stdout)
	}
	if len(lines) > 2 && strings.HasPrefix(lines[2], "/root") {
		t.Errorf("HOME is still root's: %s", lines[2])
	}
}

func TestUnwritableOutputFailsBeforeRunning(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	code, _, stderr := coldtrace(t, nil, "--json", "/nonexistent-dir/s.json", "--", "touch", marker)
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr, "/nonexistent-dir") {
		t.Errorf("error does not name the path: %q", stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran although the output path was unwritable")
	}
}

func TestMissingCommandIsUsageError(t *testing.T) {
	code, _, stderr := coldtrace(t, nil, "--json", "x.json")
	if code != exitUsage || !strings.Contains(stderr, "no command") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestNotRootSaysSo(t *testing.T) {
	if os.Geteuid() != 0 {
		code, _, stderr := coldtrace(t, nil, "--", "true")
		if code != exitFailure || !strings.Contains(stderr, "needs root") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
		return
	}
	// As root, drop to nobody to see the message a user gets (TestMain
	// built the binary where every user can run it).
	cmd := exec.Command(ctBin, "--", "true")
	cmd.Dir = "/"
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Skipf("cannot run coldtrace as nobody (%v); the message is checked by non-root runs", err)
	}
	if ee.ExitCode() != exitFailure || !strings.Contains(errb.String(), "needs root") {
		t.Errorf("exit %d, stderr %q", ee.ExitCode(), errb.String())
	}
	if strings.Contains(errb.String(), "goroutine") {
		t.Errorf("stack trace in the error: %s", errb.String())
	}
}

func TestReportRerendersRecord(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "r.ctrace")
	if code, _, stderr := coldtrace(t, nil, "-q", "-o", rec, "--", "sh", "-c", "sleep 0.3"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, stdout, stderr := coldtrace(t, nil, "report", "--json", rec)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr)
	}
	var s summaryJSON
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.WallNS < int64(300*time.Millisecond) {
		t.Errorf("wall %v from the record", time.Duration(s.WallNS))
	}
	if s.category("other_wait") < int64(250*time.Millisecond) {
		t.Errorf("sleep 0.3 gave other_wait %v", time.Duration(s.category("other_wait")))
	}
	code, stdout, _ = coldtrace(t, nil, "report", rec)
	if code != 0 || !strings.Contains(stdout, "other wait") {
		t.Errorf("text report exit %d:\n%s", code, stdout)
	}
}

func TestCorruptRecordIsClearError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.ctrace")
	if err := os.WriteFile(path, []byte("{\"schema\": \"coldtrace.record/v1\", \"wall_ns\": "), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := coldtrace(t, nil, "report", path)
	if code != exitFailure || !strings.Contains(stderr, "corrupt or truncated") || strings.Contains(stderr, "goroutine") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if err := os.WriteFile(path, []byte(`{"schema": "other/v9"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = coldtrace(t, nil, "report", path)
	if code != exitFailure || !strings.Contains(stderr, "not a coldtrace record") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
