package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/marks"
	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
)

// startPyServer starts testdata/attach/server.py outside coldtrace and returns
// its process and port.
func startPyServer(t *testing.T, data string, wrap ...string) (*exec.Cmd, int) {
	t.Helper()
	if _, err := exec.Command("/usr/bin/python3", "-c", "import numba").CombinedOutput(); err != nil {
		t.Skip("python3-numba is not installed (apt-get install python3-numba)")
	}
	script, err := filepath.Abs("../../testdata/attach/server.py")
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string(nil), wrap...), "/usr/bin/python3", script, data)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "NUMBA_CACHE_DIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("server did not start: %v", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ready ")))
	if err != nil {
		t.Fatalf("server said %q", line)
	}
	return cmd, port
}

// attachRun is a coldtrace attach running in the background.
type attachRun struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
}

func startAttach(t *testing.T, args ...string) *attachRun {
	t.Helper()
	a := &attachRun{cmd: exec.Command(ctBin, append([]string{"attach"}, args...)...)}
	a.cmd.Env = os.Environ()
	a.cmd.Stderr = &a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.cmd.Process.Kill() })
	// Attached once its process list is written.
	pids := filepath.Join(marks.Dir, strconv.Itoa(a.cmd.Process.Pid)+".pids")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(pids); err == nil {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("attach did not start; stderr:\n%s", a.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *attachRun) stop(t *testing.T) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("attach: %v; stderr:\n%s", err, a.stderr.String())
	}

}

func get(t *testing.T, port int, path string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func rowNS(res *attribution.Result, c attribution.Category) int64 {
	if r := res.Row(c); r != nil {
		return r.NS
	}
	return 0
}

// threeRounds marks and requests three rounds with idle time between.
func threeRounds(t *testing.T, pid, port int) {
	t.Helper()
	for i := 1; i <= 3; i++ {
		if code, _, stderr := coldtrace(t, nil, "mark", "--pid", strconv.Itoa(pid), fmt.Sprintf("round %d", i)); code != 0 {
			t.Fatalf("mark: %d %s", code, stderr)
		}
		time.Sleep(300 * time.Millisecond)
		get(t, port, "/")
		time.Sleep(700 * time.Millisecond)
	}
}

// checkRounds asserts round 1 read from disk and compiled, rounds 2-3
// neither, and returns the segments.
func checkRounds(t *testing.T, rec *record.Record, data string) []attribution.SegmentResult {
	t.Helper()
	if err := invariants.Err(rec); err != nil {
		t.Errorf("invariants: %v", err)
	}
	if rec.Attached == nil || rec.Attached.Threads == 0 {
		t.Fatalf("record has no attach facts: %+v", rec.Attached)
	}
	segs := attribution.Options{}.AnalyzeSegments(rec, attribution.Segments(rec, attribution.SegmentOptions{}))
	byLabel := map[string]attribution.SegmentResult{}
	for _, s := range segs {
		byLabel[s.Label] = s
		t.Logf("segment %d %q [%v, %v): disk %v jit %v cpu %v other %v", s.Index, s.Label,
			time.Duration(s.StartNS), time.Duration(s.EndNS), time.Duration(rowNS(s.Result, attribution.DiskRead)),
			time.Duration(rowNS(s.Result, attribution.JITCompile)), time.Duration(rowNS(s.Result, attribution.CPU)),
			time.Duration(rowNS(s.Result, attribution.OtherWait)))
	}
	r1, ok1 := byLabel["round 1"]
	r2, ok2 := byLabel["round 2"]
	r3, ok3 := byLabel["round 3"]
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("segments %+v: want rounds 1-3", segs)
	}
	disk1, jit1 := rowNS(r1.Result, attribution.DiskRead), rowNS(r1.Result, attribution.JITCompile)
	if disk1 < 20*time.Millisecond.Nanoseconds() {
		t.Errorf("round 1 disk reads %v: want the cold 128 MiB read", time.Duration(disk1))
	}
	if jit1 < 20*time.Millisecond.Nanoseconds() {
		// What the record saw compile, to tell a probe linked late from
		// compile time the segment gave another category.
		var seen []string
		if rec.JIT != nil {
			for _, w := range rec.JIT.Windows {
				seen = append(seen, fmt.Sprintf("%s %s [%v, %v)", w.Kind, w.Source, time.Duration(w.StartNS), time.Duration(w.EndNS)))
			}
			for _, u := range rec.JIT.Uprobes {
				seen = append(seen, fmt.Sprintf("probe %s: %d calls, %v (%s)", u.Name, u.Calls, time.Duration(u.TotalNS), u.Error))
			}
		}
		t.Errorf("round 1 JIT compile %v: want the Numba compile; the record's compiles: %q", time.Duration(jit1), seen)
	}
	if row := r1.Result.Row(attribution.DiskRead); row == nil || len(row.Files) == 0 || row.Files[0].Path != data {
		t.Errorf("round 1 disk evidence: want %s first, got %+v", data, row)
	}
	for _, r := range []attribution.SegmentResult{r2, r3} {
		if d := rowNS(r.Result, attribution.DiskRead); d > disk1/10 {
			t.Errorf("%s disk reads %v: want none (round 1: %v)", r.Label, time.Duration(d), time.Duration(disk1))
		}
		if j := rowNS(r.Result, attribution.JITCompile); j > jit1/10 {
			t.Errorf("%s JIT compile %v: want none (round 1: %v)", r.Label, time.Duration(j), time.Duration(jit1))
		}
	}
	return segs
}

func TestAttachRoundsWithMarks(t *testing.T) {
	requireTracing(t)
	data := e2eutil.EvictableFile(t, 128<<20)
	srv, port := startPyServer(t, data)
	pid := srv.Process.Pid
	rec := filepath.Join(t.TempDir(), "attach.rec")
	a := startAttach(t, "--pid", strconv.Itoa(pid), "-o", rec)
	if code, _, stderr := coldtrace(t, nil, "attach", "--pid", strconv.Itoa(pid)); code == 0 || !strings.Contains(stderr, "traced already") {
		t.Errorf("second attach: exit %d, %q: want a refusal", code, stderr)
	}
	threeRounds(t, pid, port)
	a.stop(t)
	r := readRecord(t, rec)
	checkRounds(t, r, data)
	if !strings.Contains(a.stderr.String(), "attached at +0; 1 process,") {
		t.Errorf("summary does not say how the trace began:\n%s", a.stderr.String())
	}
	code, out, stderr := coldtrace(t, nil, "diff", "--segments", "round 1,round 2", rec)
	if code != 0 {
		t.Fatalf("diff --segments: %d %s", code, stderr)
	}
	t.Logf("diff:\n%s", out)
	if !strings.Contains(out, "faster") || !strings.Contains(out, "less disk reads") {
		t.Errorf("diff of rounds 1 and 2 does not say why round 2 was faster:\n%s", out)
	}
	code, out, _ = coldtrace(t, nil, "report", "--segments", rec)
	if code != 0 || !strings.Contains(out, "round 3") {
		t.Errorf("report --segments: %d\n%s", code, out)
	}
	if srv.ProcessState != nil {
		t.Errorf("the server stopped with the trace")
	}
}

func TestAttachBadInput(t *testing.T) {
	requireTracing(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"attach", "--pid", "999999999"}, "no such process"},
		{[]string{"attach", "--pid", "2"}, "kernel thread"},
		{[]string{"attach", "--cgroup", os.TempDir()}, "not a cgroup"},
	} {
		code, _, stderr := coldtrace(t, nil, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, %q: want one line saying %q", c.args, code, stderr, c.want)
		}
	}
	if ts, _ := marks.Running(marks.Dir); len(ts) == 0 {
		code, _, stderr := coldtrace(t, nil, "mark", "x")
		if code == 0 || !strings.Contains(stderr, "no coldtrace trace is running") {
			t.Errorf("mark with no trace: %d %q", code, stderr)
		}
	}
}

// TestAttachCgroup places the server in a cgroup the test creates and
// traces the cgroup: the rounds come out as with --pid, a child the
// server forks after the attach is traced, and so is a process placed in
// the cgroup after the attach.
func TestAttachCgroup(t *testing.T) {
	requireTracing(t)
	cg := filepath.Join("/sys/fs/cgroup/unified", fmt.Sprintf("coldtrace-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot create a cgroup v2 directory: %v", err)
	}
	t.Cleanup(func() {
		// Move what is left back to the root, then remove the cgroup.
		if b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs")); err == nil {
			for _, p := range strings.Fields(string(b)) {
				_ = os.WriteFile("/sys/fs/cgroup/unified/cgroup.procs", []byte(p), 0)
			}
		}
		if err := os.Remove(cg); err != nil {
			t.Logf("remove %s: %v", cg, err)
		}
	})
	join := func(pid int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatalf("move pid %d into %s: %v", pid, cg, err)
		}
	}
	data := e2eutil.EvictableFile(t, 128<<20)
	srv, port := startPyServer(t, data)
	join(srv.Process.Pid)
	rec := filepath.Join(t.TempDir(), "cgroup.rec")
	a := startAttach(t, "--cgroup", cg, "-o", rec)
	threeRounds(t, srv.Process.Pid, port)
	get(t, port, "/fork")
	late := exec.Command("/bin/sh", "-c", "sleep 0.3; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := late.Start(); err != nil {
		t.Fatal(err)
	}
	join(late.Process.Pid)
	if err := late.Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	a.stop(t)
	r := readRecord(t, rec)
	checkRounds(t, r, data)
	var child, joined *record.Process
	for i := range r.Processes {
		p := &r.Processes[i]
		if p.PPID == int32(srv.Process.Pid) && p.PID != int32(srv.Process.Pid) {
			child = p
		}
		if p.PID == int32(late.Process.Pid) {
			joined = p
		}
	}
	// The child spins for 0.3 s: runnable all its life, on a CPU or
	// waiting for one (in CI, other load left it 24 ms of CPU and 240 ms
	// in the run queue).
	if child == nil || child.CPUNS == 0 || child.CPUNS+child.RunQueueNS < 200*time.Millisecond.Nanoseconds() {
		t.Errorf("the server's forked child is not traced with its CPU and run-queue time: %+v", child)
	}
	if joined == nil || joined.CPUNS == 0 {
		t.Errorf("the process placed in the cgroup later is not traced: %+v (processes %+v)", joined, r.Processes)
	}
	if r.Attached == nil || r.Attached.Cgroup != cg {
		t.Errorf("record's attach facts: %+v", r.Attached)
	}
}

// TestAttachMountNamespace: a server in its own mount namespace reads its
// file through a bind mount that exists only there; the record names the
// file by the path the process used.
func TestAttachMountNamespace(t *testing.T) {
	requireTracing(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	data := e2eutil.EvictableFile(t, 128<<20)
	mp := t.TempDir() // empty on the host; data's directory inside
	used := filepath.Join(mp, filepath.Base(data))
	srv, port := startPyServer(t, used, "unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		`mount --bind "$1" "$2" && shift 2 && exec "$@"`, "sh", filepath.Dir(data), mp)
	rec := filepath.Join(t.TempDir(), "ns.rec")
	a := startAttach(t, "--pid", strconv.Itoa(srv.Process.Pid), "-o", rec)
	threeRounds(t, srv.Process.Pid, port)
	a.stop(t)
	r := readRecord(t, rec)
	checkRounds(t, r, used)
	for _, f := range r.Files {
		if f.Path == used && f.HostPath != data {
			t.Errorf("%s: host path %q, want %s", used, f.HostPath, data)
		}
	}
	if !strings.Contains(a.stderr.String(), "(on the host: "+data+")") {
		t.Errorf("the summary does not give the host's path:\n%s", a.stderr.String())
	}
}

// TestAttachSplitIdle: three CPU bursts separated by 1 s sleeps, traced
// with --split-idle 500ms, give three segments, each with its burst.
func TestAttachSplitIdle(t *testing.T) {
	requireTracing(t)
	script := `import time
time.sleep(1.5)
for i in range(3):
    end = time.time() + 0.3
    while time.time() < end:
        pass
    if i < 2:
        time.sleep(1)
`
	cmd := exec.Command("/usr/bin/python3", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	rec := filepath.Join(t.TempDir(), "idle.rec")
	js := filepath.Join(t.TempDir(), "segments.json")
	a := startAttach(t, "--pid", strconv.Itoa(cmd.Process.Pid), "--split-idle", "500ms", "-o", rec, "--json", js)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// The trace ends by itself once the process has exited.
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("attach: %v\n%s", err, a.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("attach did not end when the process exited:\n%s", a.stderr.String())
	}
	r := readRecord(t, rec)
	if err := invariants.Err(r); err != nil {
		t.Errorf("invariants: %v", err)
	}
	segs := attribution.Options{}.AnalyzeSegments(r, attribution.Segments(r, attribution.SegmentOptions{}))
	if len(segs) != 3 {
		t.Fatalf("%d segments, want 3: %+v\n%s", len(segs), segs, a.stderr.String())
	}
	for _, s := range segs {
		cpu := rowNS(s.Result, attribution.CPU)
		t.Logf("segment %d [%v, %v): cpu %v", s.Index, time.Duration(s.StartNS), time.Duration(s.EndNS), time.Duration(cpu))
		if cpu < 200*time.Millisecond.Nanoseconds() {
			t.Errorf("segment %d CPU %v: want its 300 ms burst", s.Index, time.Duration(cpu))
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Segments []struct {
			Label     string `json:"label"`
			StartNS   int64  `json:"start_ns"`
			EndNS     int64  `json:"end_ns"`
			Breakdown []struct {
				Category string `json:"category"`
				NS       int64  `json:"ns"`
			} `json:"breakdown"`
		} `json:"segments"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Segments) != 3 || len(sum.Segments[0].Breakdown) != 6 || sum.Segments[2].EndNS != r.WallNS {
		t.Errorf("JSON segments: %+v", sum.Segments)
	}
}

// TestAttachUnderSudo: under sudo only the invoking user's processes may
// be attached to, and the mark socket is theirs.
func TestAttachUnderSudo(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	rootSleep := exec.Command("sleep", "30")
	if err := rootSleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rootSleep.Process.Kill(); _ = rootSleep.Wait() })
	code, _, stderr := coldtrace(t, u.SudoEnviron(nil), "attach", "--pid", strconv.Itoa(rootSleep.Process.Pid))
	if code == 0 || !strings.Contains(stderr, "is not "+u.Name) {
		t.Errorf("attach to root's process under sudo: exit %d, %q: want a refusal", code, stderr)
	}
	mine := exec.Command("sleep", "30")
	mine.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
	if err := mine.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mine.Process.Kill(); _ = mine.Wait() })
	a := &attachRun{cmd: exec.Command(ctBin, "attach", "--pid", strconv.Itoa(mine.Process.Pid), "--duration", "3s")}
	a.cmd.Env = u.SudoEnviron(os.Environ())
	a.cmd.Stderr = &a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sock := marks.SocketPath(marks.Dir, a.cmd.Process.Pid)
	deadline := time.Now().Add(20 * time.Second)
	var st syscall.Stat_t
	for syscall.Stat(sock, &st) != nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if int(st.Uid) != u.UID || st.Mode&0o777 != 0o600 {
		t.Errorf("mark socket owner %d mode %o: want %d, 0600", st.Uid, st.Mode&0o777, u.UID)
	}
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("attach to the user's own process: %v\n%s", err, a.stderr.String())
	}
	if !strings.Contains(a.stderr.String(), "attached at +0; 1 process, 1 thread;") {
		t.Errorf("summary:\n%s", a.stderr.String())
	}
}

// TestRunMarksItself: a command started by coldtrace run keeps its
// environment, gets COLDTRACE_MARK, and marks itself with one datagram.
func TestRunMarksItself(t *testing.T) {
	requireTracing(t)
	js := filepath.Join(t.TempDir(), "run.json")
	script := `import os, socket, time
assert os.environ["KEEP_ME"] == "1"
def mark(label):
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(label.encode(), os.environ["COLDTRACE_MARK"])
mark("load")
time.sleep(0.3)
mark("spin")
end = time.time() + 0.4
while time.time() < end:
    pass
`
	code, _, stderr := coldtrace(t, []string{"KEEP_ME=1"}, "run", "--json", js, "--", "/usr/bin/python3", "-c", script)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	var sum struct {
		Marks    []record.Mark `json:"marks"`
		Segments []struct {
			Label     string `json:"label"`
			Breakdown []struct {
				Category string `json:"category"`
				NS       int64  `json:"ns"`
			} `json:"breakdown"`
		} `json:"segments"`
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Marks) != 2 || sum.Marks[0].Label != "load" || sum.Marks[1].Label != "spin" {
		t.Fatalf("marks %+v", sum.Marks)
	}
	last := sum.Segments[len(sum.Segments)-1]
	var cpu int64
	for _, r := range last.Breakdown {
		if r.Category == "cpu" {
			cpu = r.NS
		}
	}
	if last.Label != "spin" || cpu < 300*time.Millisecond.Nanoseconds() {
		t.Errorf("segment %q CPU %v: want the 400 ms spin", last.Label, time.Duration(cpu))
	}
}
