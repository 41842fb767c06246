package e2e

// End-to-end tests of marks across users, stale state entries, pushes
// under sudo, a dead stderr pipe and late signals. As in
// rootsafe_e2e_test.go, the sudo cases run coldtrace (as
// root) with SUDO_UID/SUDO_GID/SUDO_USER of accounts the test creates.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/config"
	"github.com/coldtrace/coldtrace/internal/marks"
	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
)

// realRoot is the environment of a real root login: no sudo variables
// (exec keeps the last of duplicate keys, so these override os.Environ).
var realRoot = []string{"SUDO_UID=", "SUDO_GID=", "SUDO_USER=", "DOAS_USER=", "PKEXEC_UID="}

// syncBuffer is a bytes.Buffer that a test reads while coldtrace writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bgTrace is a coldtrace run in the background.
type bgTrace struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	done   chan struct{}
	err    error
}

func startTrace(t *testing.T, env []string, args ...string) *bgTrace {
	t.Helper()
	b := &bgTrace{cmd: exec.Command(ctBin, args...), done: make(chan struct{})}
	b.cmd.Env = append(os.Environ(), env...)
	b.cmd.Stderr = &b.stderr
	// A command left running when coldtrace is killed must not hold Wait
	// on its stderr.
	b.cmd.WaitDelay = 5 * time.Second
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() { _ = b.cmd.Process.Kill(); <-b.done })
	return b
}

// waitFor waits until cond holds, failing t (with the trace's stderr)
// after a minute: a bound for a loaded machine, not a measurement.
func (b *bgTrace) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		select {
		case <-b.done:
			t.Fatalf("coldtrace ended (%v) before %s; stderr:\n%s", b.err, what, b.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s; stderr:\n%s", what, b.stderr.String())
		}
	}
}

// commandPID waits until the trace lists its command and returns its pid.
func (b *bgTrace) commandPID(t *testing.T) int {
	t.Helper()
	var pid int
	b.waitFor(t, "process list", func() bool {
		data, err := os.ReadFile(filepath.Join(marks.Dir, strconv.Itoa(b.cmd.Process.Pid)+".pids"))
		if err != nil {
			return false
		}
		f := strings.Fields(string(data))
		if len(f) == 0 {
			return false
		}
		pid, err = strconv.Atoi(f[0])
		return err == nil
	})
	return pid
}

// waitMark waits until the trace has taken the mark label.
func (b *bgTrace) waitMark(t *testing.T, label string) {
	t.Helper()
	b.waitFor(t, "mark "+label, func() bool { return strings.Contains(b.stderr.String(), fmt.Sprintf("mark %q at", label)) })
}

func (b *bgTrace) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(time.Minute):
		t.Fatalf("coldtrace still runs; stderr:\n%s", b.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(b.err, &ee) {
		return ee.ExitCode()
	}
	if b.err != nil {
		t.Fatalf("coldtrace: %v", b.err)
	}
	return 0
}

// waitForFile is the end of a run's arguments: a command that waits
// until path exists, killed if coldtrace dies first (a test that fails
// leaves nothing running).
func waitForFile(path string) []string {
	return []string{"--kill-on-exit", "--", "sh", "-c", `while [ ! -e "$0" ]; do sleep 0.05; done`, path}
}

func markLabels(t *testing.T, path string) []string {
	t.Helper()
	rec, err := record.ReadFile(path)
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	var out []string
	for _, m := range rec.Marks {
		out = append(out, m.Label)
	}
	return out
}

// TestMarkOnlyTheUsersOwnTraces: under sudo, `mark --pid` reaches only
// traces run for the invoking user: B cannot mark A's trace, A cannot
// mark a real root's, A marks its own (by pid, and without a pid while
// root's trace runs too), and a real root login marks any. Each record
// holds exactly the allowed marks. Refused marks are tried first, so one
// that slipped through would be in the record before the allowed ones.
func TestMarkOnlyTheUsersOwnTraces(t *testing.T) {
	requireTracing(t)
	ua, ub := testuser.Create(t), testuser.Create(t)
	dirA, dirR := userDir(t, ua), t.TempDir()
	recA, recR := filepath.Join(dirA, "a.rec"), filepath.Join(dirR, "r.rec")
	goA, goR := filepath.Join(dirA, "go"), filepath.Join(dirR, "go")
	ta := startTrace(t, sudoEnv(ua), append([]string{"-q", "-o", recA}, waitForFile(goA)...)...)
	tr := startTrace(t, realRoot, append([]string{"-q", "-o", recR}, waitForFile(goR)...)...)
	cmdA, cmdR := ta.commandPID(t), tr.commandPID(t)

	refused := []struct {
		who  testuser.User
		args []string
		want string
	}{
		{ub, []string{"mark", "--pid", strconv.Itoa(cmdA), "b-on-a"}, fmt.Sprintf("pid %d is traced by coldtrace (pid %d) for another user", cmdA, ta.cmd.Process.Pid)},
		{ub, []string{"mark", "--pid", strconv.Itoa(ta.cmd.Process.Pid), "b-on-a-tracer"}, "not yours to mark"},
		{ua, []string{"mark", "--pid", strconv.Itoa(cmdR), "a-on-root"}, fmt.Sprintf("pid %d is traced by coldtrace (pid %d) for another user (uid 0)", cmdR, tr.cmd.Process.Pid)},
		{ub, []string{"mark", "b-guess"}, "no coldtrace trace is running for you"},
	}
	for _, c := range refused {
		r := runCT(t, ctOptions{env: sudoEnv(c.who)}, c.args...)
		if r.code != exitFailure || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%s: %q: exit %d, stderr %q; want %d and one line saying %q", c.who.Name, c.args, r.code, r.stderr, exitFailure, c.want)
		}
	}
	allowed := []struct {
		env   []string
		args  []string
		trace *bgTrace
	}{
		{sudoEnv(ua), []string{"mark", "--pid", strconv.Itoa(cmdA), "a-own"}, ta},
		{sudoEnv(ua), []string{"mark", "a-only"}, ta},
		{realRoot, []string{"mark", "--pid", strconv.Itoa(cmdR), "root-own"}, tr},
		{realRoot, []string{"mark", "--pid", strconv.Itoa(cmdA), "root-on-a"}, ta},
	}
	for _, c := range allowed {
		if r := runCT(t, ctOptions{env: c.env}, c.args...); r.code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", c.args, r.code, r.stderr)
		}
		c.trace.waitMark(t, c.args[len(c.args)-1])
	}
	for _, p := range []string{goA, goR} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []*bgTrace{ta, tr} {
		if code := b.exitCode(t); code != 0 {
			t.Fatalf("trace exit %d; stderr:\n%s", code, b.stderr.String())
		}
	}
	if got := markLabels(t, recA); strings.Join(got, ",") != "a-own,a-only,root-on-a" {
		t.Errorf("A's record has %d marks %q, want the 3 allowed", len(got), got)
	}
	if got := markLabels(t, recR); strings.Join(got, ",") != "root-own" {
		t.Errorf("root's record has %d marks %q, want the 1 allowed", len(got), got)
	}
}

// sigIgnMask reads the SigIgn mask a `grep SigIgn /proc/self/status`
// wrote to path.
func sigIgnMask(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] != "SigIgn:" {
		t.Fatalf("%s: %q", path, b)
	}
	m, err := strconv.ParseUint(f[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const sigpipeBit = 1 << (syscall.SIGPIPE - 1)

// checkPipeRun asserts a run whose stderr pipe died: the command's exit
// code, the record with marks, the JSON summary, no .partial, and a
// command that had SIGPIPE at its default.
func checkPipeRun(t *testing.T, dir string, code int, stderr string, labels []string) {
	t.Helper()
	if code != 7 {
		t.Errorf("coldtrace exit %d, want the command's 7 (stderr before the pipe died: %q)", code, stderr)
	}
	if got := markLabels(t, filepath.Join(dir, "r.rec")); strings.Join(got, ",") != strings.Join(labels, ",") {
		t.Errorf("marks %q, want %q", got, labels)
	}
	if s := readSummary(t, filepath.Join(dir, "s.json")); s.ExitCode != 7 {
		t.Errorf("summary exit_code %d", s.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.rec.partial")); err == nil {
		t.Error("a .partial checkpoint was left behind")
	}
	if m := sigIgnMask(t, filepath.Join(dir, "sigign")); m&sigpipeBit != 0 {
		t.Errorf("the command ran with SIGPIPE ignored (SigIgn %x)", m)
	}
}

// pipeScript records the command's ignored signals, marks the trace
// through COLDTRACE_MARK (a label given), waits for a file (one given),
// and exits 7.
func pipeScript(dir, label, waitFile string) string {
	s := fmt.Sprintf("grep SigIgn /proc/self/status > %s/sigign\n", dir)
	if label != "" {
		s += fmt.Sprintf(`python3 -c 'import os, socket; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"%s", os.environ["COLDTRACE_MARK"])'
`, label)
	}
	if waitFile != "" {
		s += fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done\n", waitFile)
	}
	return s + "exit 7\n"
}

// TestDeadStderrPipeKeepsTheTrace: coldtrace's stdout and stderr are a
// pipe whose reader is gone (`coldtrace ... 2>&1 | true`), from the start
// or from the middle of the run: coldtrace is not killed by SIGPIPE,
// writes every output, leaves no checkpoint, and exits with the
// command's code; the command itself has SIGPIPE at its default.
func TestDeadStderrPipeKeepsTheTrace(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	args := func(dir, script string) []string {
		return []string{"-o", filepath.Join(dir, "r.rec"), "--json", filepath.Join(dir, "s.json"), "--", "sh", "-c", script}
	}
	start := func(dir, script string) (*exec.Cmd, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(ctBin, args(dir, script)...)
		cmd.Env = u.SudoEnviron(os.Environ())
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		return cmd, r
	}
	exitOf := func(cmd *exec.Cmd) int {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}

	t.Run("dead from the start", func(t *testing.T) {
		dir := userDir(t, u)
		cmd, r := start(dir, pipeScript(dir, "", ""))
		r.Close()
		checkPipeRun(t, dir, exitOf(cmd), "", nil)
	})
	t.Run("dies after a mark", func(t *testing.T) {
		dir := userDir(t, u)
		goFile := filepath.Join(dir, "go")
		cmd, r := start(dir, pipeScript(dir, "m", goFile))
		var seen bytes.Buffer
		sc := bufio.NewScanner(io.TeeReader(r, &seen))
		for sc.Scan() && !strings.Contains(sc.Text(), `mark "m" at`) {
		}
		r.Close() // the reader goes; the summary still to come meets EPIPE
		if err := os.WriteFile(goFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		checkPipeRun(t, dir, exitOf(cmd), seen.String(), []string{"m"})
	})
}

// fakeStaleEntry puts into marks.Dir what a coldtrace killed with SIGKILL
// leaves once its pid is reused by tracer: a socket owned by owner that
// no one listens on (live false) or that the test holds (live true), the
// start time given, and a process list naming traced.
func fakeStaleEntry(t *testing.T, tracer int, owner testuser.User, live bool, start uint64, traced int) *net.UnixConn {
	t.Helper()
	if err := os.MkdirAll(marks.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := marks.SocketPath(marks.Dir, tracer)
	base := strings.TrimSuffix(sock, ".sock")
	t.Cleanup(func() {
		for _, ext := range []string{".sock", ".pids", ".start"} {
			os.Remove(base + ext)
		}
	})
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sock, owner.UID, owner.GID); err != nil {
		t.Fatal(err)
	}
	if live {
		t.Cleanup(func() { conn.Close() })
	} else {
		conn.Close()
	}
	for ext, data := range map[string]string{".pids": fmt.Sprintf("%d\n", traced), ".start": fmt.Sprintf("%d\n", start)} {
		if err := os.WriteFile(base+ext, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// noDatagram fails t if a mark reached conn. A datagram is queued when
// its send returns, so a read that may not wait sees any that was sent.
func noDatagram(t *testing.T, conn *net.UnixConn) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 64)); err == nil {
		t.Errorf("the stale socket got a %d-byte mark", n)
	}
}

func entryGone(t *testing.T, tracer int) {
	t.Helper()
	base := strings.TrimSuffix(marks.SocketPath(marks.Dir, tracer), ".sock")
	for _, ext := range []string{".sock", ".pids", ".start"} {
		if _, err := os.Lstat(base + ext); err == nil {
			t.Errorf("stale %s%s was not removed", base, ext)
		}
	}
}

// TestStaleStateEntriesIgnoredAndRemoved: entries a killed coldtrace
// left, whose pid now belongs to another process, neither block an
// attach to the command it traced nor count as a trace for mark: one
// whose socket refuses connections, and one whose pid started at another
// time than recorded (its socket still answering). Both are removed.
func TestStaleStateEntriesIgnoredAndRemoved(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	orphan := exec.Command("sleep", "60")
	orphan.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
	reuser := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{orphan, reuser} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	start, err := marks.StartTime(reuser.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}

	// A dead socket, its start time matching the reusing process.
	fakeStaleEntry(t, reuser.Process.Pid, u, false, start, orphan.Process.Pid)
	r := runCT(t, ctOptions{env: sudoEnv(u)}, "attach", "-q", "--pid", strconv.Itoa(orphan.Process.Pid), "--duration", "1s")
	if r.code != 0 || strings.Contains(r.stderr, "traced already") {
		t.Errorf("attach to the orphaned command: exit %d, stderr %q", r.code, r.stderr)
	}
	entryGone(t, reuser.Process.Pid)

	// A socket that answers but a start time that is not the pid's, next
	// to a live trace of the same user: mark without --pid finds one.
	dir := userDir(t, u)
	goFile := filepath.Join(dir, "go")
	live := startTrace(t, sudoEnv(u), append([]string{"-q", "-o", filepath.Join(dir, "r.rec")}, waitForFile(goFile)...)...)
	live.commandPID(t)
	fake := fakeStaleEntry(t, reuser.Process.Pid, u, true, start+1, orphan.Process.Pid)
	if r := runCT(t, ctOptions{env: sudoEnv(u)}, "mark", "--pid", strconv.Itoa(orphan.Process.Pid), "stale"); r.code != exitFailure ||
		strings.Contains(r.stderr, "traced by") || !strings.Contains(r.stderr, "no running trace of yours follows pid") {
		t.Errorf("mark --pid of the orphaned command: exit %d, stderr %q", r.code, r.stderr)
	}
	entryGone(t, reuser.Process.Pid)
	noDatagram(t, fake)
	fake = fakeStaleEntry(t, reuser.Process.Pid, u, true, start+1, orphan.Process.Pid)
	if r := runCT(t, ctOptions{env: sudoEnv(u)}, "mark", "only"); r.code != 0 {
		t.Errorf("mark with a stale entry beside the live trace: exit %d, stderr %q", r.code, r.stderr)
	}
	live.waitMark(t, "only")
	entryGone(t, reuser.Process.Pid)
	noDatagram(t, fake)
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := live.exitCode(t); code != 0 {
		t.Fatalf("live trace exit %d; stderr:\n%s", code, live.stderr.String())
	}
	if got := markLabels(t, filepath.Join(dir, "r.rec")); strings.Join(got, ",") != "only" {
		t.Errorf("marks %q, want the 1 mark", got)
	}
}

// useConfig writes content as /etc/coldtrace/config with mode, putting
// back what was there when t ends.
func useConfig(t *testing.T, content string, mode os.FileMode) {
	t.Helper()
	dir := filepath.Dir(config.Path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dir) })
	}
	old, err := os.ReadFile(config.Path)
	switch {
	case err == nil:
		st, _ := os.Stat(config.Path)
		t.Cleanup(func() { _ = os.WriteFile(config.Path, old, 0o644); _ = os.Chmod(config.Path, st.Mode().Perm()) })
	case errors.Is(err, os.ErrNotExist):
		t.Cleanup(func() { os.Remove(config.Path) })
	default:
		t.Fatal(err)
	}
	if content == "" {
		os.Remove(config.Path)
		return
	}
	if err := os.WriteFile(config.Path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(config.Path, mode); err != nil {
		t.Fatal(err)
	}
}

// countingGateway is a Pushgateway stand-in that counts requests by the
// first component of their path (allowed, other, redir) and redirects
// those under /redir to /other.
func countingGateway(t *testing.T) (*httptest.Server, func() string) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		top, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		mu.Lock()
		hits[top]++
		mu.Unlock()
		if top == "redir" {
			http.Redirect(w, r, "/other/metrics", http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("allowed=%d other=%d redir=%d", hits["allowed"], hits["other"], hits["redir"])
	}
}

// TestPushUnderSudoOnlyToAllowedURLs: under sudo, --push goes only to a
// URL that a push-allow line of root's /etc/coldtrace/config admits; any
// other is refused before the command runs, naming the URL and the file.
// A config others may write refuses every push under sudo; with no file
// pushes go anywhere; a real root login is not restricted; a redirect is
// not followed. The server counts the requests that reach it.
func TestPushUnderSudoOnlyToAllowedURLs(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	srv, count := countingGateway(t)
	dir := userDir(t, u)
	marker := filepath.Join(dir, "ran")
	var ran atomic.Int32
	push := func(env []string, url string) ctRun {
		os.Remove(marker)
		r := runCT(t, ctOptions{env: env}, "-q", "--push", url, "--", "touch", marker)
		if _, err := os.Stat(marker); err == nil {
			ran.Add(1)
		}
		return r
	}
	useConfig(t, fmt.Sprintf("# test\npush-allow %s/allowed\npush-allow %s/redir\n", srv.URL, srv.URL), 0o644)

	other := srv.URL + "/other"
	r := push(sudoEnv(u), other)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--push "+other+" refused under sudo: "+config.Path+" has no push-allow line") ||
		strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("push to %s under sudo: exit %d, stderr %q", other, r.code, r.stderr)
	}
	if r := push(sudoEnv(u), srv.URL+"/allowed"); r.code != 0 {
		t.Errorf("allowed push: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := push(sudoEnv(u), srv.URL+"/redir"); r.code != 0 || !strings.Contains(r.stderr, "not followed") {
		t.Errorf("redirected push: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := push(realRoot, other); r.code != 0 {
		t.Errorf("push to %s on a real root login: exit %d, stderr %q", other, r.code, r.stderr)
	}
	if got, want := count(), "allowed=1 other=1 redir=1"; got != want || ran.Load() != 3 {
		t.Errorf("requests %s, commands run %d; want %s and 3", got, ran.Load(), want)
	}

	useConfig(t, fmt.Sprintf("push-allow %s/allowed\n", srv.URL), 0o664)
	r = push(sudoEnv(u), srv.URL+"/allowed")
	if r.code != exitUsage || !strings.Contains(r.stderr, config.Path) || !strings.Contains(r.stderr, "writable by group or others") {
		t.Errorf("push with a group-writable config: exit %d, stderr %q", r.code, r.stderr)
	}
	useConfig(t, "", 0)
	if r := push(sudoEnv(u), other); r.code != 0 {
		t.Errorf("push with no config: exit %d, stderr %q", r.code, r.stderr)
	}
	if got, want := count(), "allowed=1 other=2 redir=1"; got != want || ran.Load() != 4 {
		t.Errorf("requests %s, commands run %d; want %s and 4", got, ran.Load(), want)
	}
}
