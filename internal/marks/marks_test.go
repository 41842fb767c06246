package marks

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestListenSendFind(t *testing.T) {
	dir := t.TempDir()
	if _, err := Find(dir, 0, anyTrace); !errors.Is(err, ErrNoTrace) {
		t.Fatalf("Find with no trace: %v", err)
	}
	l, err := Listen(dir, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Tracing([]int{4242}); err != nil {
		t.Fatal(err)
	}
	tr, err := Find(dir, 4242, anyTrace)
	if err != nil || tr.Socket != l.Path() {
		t.Fatalf("Find(4242) = %+v, %v", tr, err)
	}
	if _, err := Find(dir, 4243, anyTrace); err == nil {
		t.Error("Find(4243): want an error")
	}
	if got, err := TracedBy(dir, 4242); err != nil || got != 0 {
		// Our own trace does not count: the caller is the trace.
		t.Errorf("TracedBy(4242) from the tracer itself = %d, %v", got, err)
	}
	sent := monotonicNS()
	if err := Send(tr.Socket, "round 1\nwith a newline"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-l.C:
		if got.Label != "round 1 with a newline" {
			t.Errorf("label %q", got.Label)
		}
		if got.MonoNS < sent || got.MonoNS > monotonicNS() {
			t.Errorf("mark read at %d ns, sent at %d ns: want its arrival", got.MonoNS, sent)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no mark arrived")
	}
	st, err := os.Stat(l.Path())
	if err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, %v: want a 0600 socket (never a FIFO)", st.Mode(), err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// With coldtrace gone a send fails at once, without blocking.
	start := time.Now()
	if err := Send(tr.Socket, "late"); err == nil {
		t.Error("send to a closed trace: want an error")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("send to a closed trace took %v", d)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestCleanLabel(t *testing.T) {
	if got := CleanLabel(" a\x00b\tc \xff"); got != "a b c ?" {
		t.Errorf("CleanLabel = %q", got)
	}
	if got := CleanLabel(strings.Repeat("é", 300)); len(got) > MaxLabel {
		t.Errorf("CleanLabel kept %d bytes", len(got))
	}
}

func anyTrace(Trace) bool { return true }

// fakeEntry makes an entry for tracer pid in dir listing traced, with a
// socket that listens (live) or was closed (dead), and a start time.
func fakeEntry(t *testing.T, dir string, pid int, live bool, start string, traced int) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: SocketPath(dir, pid), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	if !live {
		conn.Close()
	} else {
		t.Cleanup(func() { conn.Close() })
	}
	if start != "" {
		if err := os.WriteFile(startPath(dir, pid), []byte(start+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(pidsPath(dir, pid), []byte(strconv.Itoa(traced)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestStaleEntriesLeftOutAndRemoved: an entry whose socket no one
// listens on, whose pid started at another time than recorded, or whose
// pid is dead is not a trace; it is not listed and (as root) is removed.
func TestStaleEntriesLeftOutAndRemoved(t *testing.T) {
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	reaped := exec.Command("true")
	if err := reaped.Run(); err != nil {
		t.Fatal(err)
	}
	live := sleeper.Process.Pid
	start, err := StartTime(live)
	if err != nil {
		t.Fatal(err)
	}
	real := strconv.FormatUint(start, 10)
	for _, c := range []struct {
		name   string
		pid    int
		listen bool
		start  string
		stale  bool
	}{
		{"listening, right start time", live, true, real, false},
		{"listening, no start time", live, true, "", false},
		{"socket closed", live, false, real, true},
		{"socket closed, no start time", live, false, "", true},
		{"pid reused", live, true, strconv.FormatUint(start+1, 10), true},
		{"pid dead", reaped.Process.Pid, true, "", true},
	} {
		dir := t.TempDir()
		conn := fakeEntry(t, dir, c.pid, c.listen, c.start, 4242)
		ts, err := Running(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(ts); got != map[bool]int{true: 0, false: 1}[c.stale] {
			t.Errorf("%s: %d traces listed", c.name, got)
		}
		tracer, err := TracedBy(dir, 4242)
		if err != nil || (tracer != 0) == c.stale {
			t.Errorf("%s: TracedBy(4242) = %d, %v", c.name, tracer, err)
		}
		ents, _ := os.ReadDir(dir)
		if os.Geteuid() == 0 && c.stale && len(ents) != 0 {
			t.Errorf("%s: left behind %v", c.name, ents)
		}
		if !c.stale && len(ents) == 0 {
			t.Errorf("%s: a live entry was removed", c.name)
		}
		conn.Close()
	}
}

// TestFindOnlyTheUsersTraces: a trace mayMark refuses is never picked:
// by pid it fails with ErrNotYours, without a pid it is not counted as a
// choice, and its pids are not listed.
func TestFindOnlyTheUsersTraces(t *testing.T) {
	dir := t.TempDir()
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	l, err := Listen(dir, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Tracing([]int{4242}); err != nil {
		t.Fatal(err)
	}
	fakeEntry(t, dir, sleeper.Process.Pid, true, "", 5353)
	other := func(tr Trace) bool { return tr.Tracer == sleeper.Process.Pid }
	mine := func(tr Trace) bool { return !other(tr) }
	if _, err := Find(dir, 0, anyTrace); err == nil || !strings.Contains(err.Error(), "2 traces") {
		t.Errorf("Find(0) with two traces of the user: %v", err)
	}
	if tr, err := Find(dir, 0, mine); err != nil || tr.Socket != l.Path() {
		t.Errorf("Find(0) with one of the user's and another's = %+v, %v", tr, err)
	}
	if _, err := Find(dir, 5353, mine); !errors.Is(err, ErrNotYours) {
		t.Errorf("Find(5353) of another's trace = %v, want ErrNotYours", err)
	}
	if _, err := Find(dir, sleeper.Process.Pid, mine); !errors.Is(err, ErrNotYours) {
		t.Errorf("Find(tracer pid) of another's trace = %v, want ErrNotYours", err)
	}
	none := func(Trace) bool { return false }
	if _, err := Find(dir, 0, none); !errors.Is(err, ErrNoTrace) || !strings.Contains(err.Error(), "2 for other users") {
		t.Errorf("Find(0) with only others' traces = %v", err)
	}
	if _, err := Find(dir, 7, other); err == nil || strings.Contains(err.Error(), "4242") {
		t.Errorf("Find(7) = %v: want an error that lists no other user's pids", err)
	}
	if st, err := StartTime(os.Getpid()); err != nil || st == 0 {
		t.Errorf("StartTime(self) = %d, %v", st, err)
	}
	b, err := os.ReadFile(startPath(dir, os.Getpid()))
	if want, _ := StartTime(os.Getpid()); err != nil || strings.TrimSpace(string(b)) != strconv.FormatUint(want, 10) {
		t.Errorf("recorded start time %q, %v; want %d", b, err, want)
	}
}
