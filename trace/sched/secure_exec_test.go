package sched

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
)

// setuidSleep is a setuid-root copy of sleep in a directory every user
// can reach, on a filesystem that honours setuid bits.
func setuidSleep(t *testing.T) string {
	t.Helper()
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep program to copy")
	}
	dir, err := os.MkdirTemp("", "coldtrace-sched-suid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Flags&unix.ST_NOSUID != 0 {
		t.Skipf("%s is mounted nosuid (%v): no exec there is a secure one", dir, err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "suid-sleep")
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// gatedExec starts `sh -c 'read go; exec prog 30'` as nobody, seeds it
// into s's tracked set, then lets it exec; it returns the pid and a pidfd
// for it.
func gatedExec(t *testing.T, s *Sensor, prog string) (int, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `read go; exec "$0" 30`, prog)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	gate, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if err := s.Seed(pid, "sh", 1); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	var st bpfsched.SchedTstate
	if err := s.p.objs.TaskStates.Lookup(uint32(fd), &st); err != nil {
		t.Fatalf("the seeded shell is not tracked: %v", err)
	}
	if _, err := io.WriteString(gate, "go\n"); err != nil {
		t.Fatal(err)
	}
	// The exec has happened once /proc shows the new program.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); exe == prog {
			return pid, fd
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not exec %s", pid, prog)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSecureExecLeavesTrackedSet: a tracked task's exec of a setuid
// program deletes its task storage in the kernel (the tracked set every
// sensor's programs look up), frees its thread from the live ones, and
// is reported as one record.Untraced; with TraceSecureExec (a real root
// login) the task stays tracked and nothing is reported.
func TestSecureExecLeavesTrackedSet(t *testing.T) {
	testenv.RequireTracing(t)
	prog := setuidSleep(t)

	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid, fd := gatedExec(t, s, prog)
	var st bpfsched.SchedTstate
	if err := s.p.objs.TaskStates.Lookup(uint32(fd), &st); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("after its setuid exec, pid %d's task storage lookup: %v, want ErrKeyNotExist", pid, err)
	}
	var sample record.Sample
	if err := s.Poll(2, &sample); err != nil {
		t.Fatal(err)
	}
	if live, err := s.LivePIDs(); err != nil || len(live) != 0 {
		t.Errorf("live tracked pids while the setuid program runs: %v (%v), want none", live, err)
	}
	var rec record.Record
	if err := s.Finish(&rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Untraced) != 1 || rec.Untraced[0].PID != int32(pid) || rec.Untraced[0].Path != prog ||
		rec.Untraced[0].Reason != record.UntracedSetuid {
		t.Errorf("untraced = %+v, want [%s, pid %d, setuid]", rec.Untraced, prog, pid)
	}

	root, err := New(Options{TraceSecureExec: true})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	pid, fd = gatedExec(t, root, prog)
	if err := root.p.objs.TaskStates.Lookup(uint32(fd), &st); err != nil {
		t.Errorf("with TraceSecureExec, pid %d left the tracked set at its setuid exec: %v", pid, err)
	}
	var rootRec record.Record
	if err := root.Finish(&rootRec); err != nil {
		t.Fatal(err)
	}
	if len(rootRec.Untraced) != 0 {
		t.Errorf("with TraceSecureExec, untraced = %+v, want none", rootRec.Untraced)
	}
}
