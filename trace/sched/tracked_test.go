package sched

import (
	"bufio"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
)

// TestTrackedProcessesHaveTheirBit: the bit every program tests before a
// task's storage is set for a seeded process, by the kernel side for a
// process it forks (and stays set after it exits), and not for a process
// outside the tracked set.
func TestTrackedProcessesHaveTheirBit(t *testing.T) {
	testenv.RequireTracing(t)
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cmd := exec.Command("/bin/sh", "-c", `read go; sleep 0.1 & echo $!; wait`)
	gate, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	outside := exec.Command("sleep", "5")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = outside.Process.Kill(); _ = outside.Wait() })
	pid := cmd.Process.Pid
	if err := s.Seed(pid, "sh", 1); err != nil {
		t.Fatal(err)
	}
	if !s.p.tracked.has(uint32(pid)) {
		t.Errorf("seeded pid %d has no bit", pid)
	}
	if _, err := io.WriteString(gate, "go\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child pid %q: %v", line, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !s.p.tracked.has(uint32(child)) {
		t.Errorf("pid %d, forked by the tracked shell, has no bit", child)
	}
	if s.p.tracked.has(uint32(outside.Process.Pid)) {
		t.Errorf("untracked pid %d has a bit", outside.Process.Pid)
	}
}
