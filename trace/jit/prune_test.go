package jit

import (
	"reflect"
	"testing"
)

// Exited processes are dropped at the second Prune that finds them gone;
// a process Prune keeps, or one that came back (a reused pid), stays.
func TestPruneDropsExitedProcesses(t *testing.T) {
	c, err := NewCollector(Config{Proc: fakeProc{cwd: map[int32]string{1: "/"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Exec(1, 0, "/usr/bin/python3", []byte("HOME=/root\x00"))
	c.Fork(2, 1)
	c.Exec(2, 0, "/usr/bin/cc", []byte("HOME=/root\x00COLLECT_GCC=cc\x00"))
	c.Fork(3, 1)
	alive := map[int32]bool{1: true}
	keep := func(pid int32) bool { return alive[pid] }
	var dropped []int32
	onDrop := func(pid int32) { dropped = append(dropped, pid) }

	if n := c.Prune(keep, onDrop); n != 0 || len(c.procs) != 3 {
		t.Fatalf("first prune dropped %d (%v), %d left: want none dropped yet", n, dropped, len(c.procs))
	}
	alive[3] = true // pid 3 is back before the second look
	if n := c.Prune(keep, onDrop); n != 1 || len(dropped) != 1 || dropped[0] != 2 {
		t.Fatalf("second prune dropped %d: %v, want pid 2", n, dropped)
	}
	if _, ok := c.procs[2]; ok {
		t.Error("pid 2 still held")
	}
	for _, pid := range []int32{1, 3} {
		if _, ok := c.procs[pid]; !ok {
			t.Errorf("pid %d dropped", pid)
		}
	}
	delete(alive, 3)
	c.Prune(keep, onDrop)
	if n := c.Prune(keep, onDrop); n != 1 || len(c.procs) != 1 {
		t.Errorf("pid 3 gone twice: dropped %d, %d left", n, len(c.procs))
	}
}

// TestEnvironmentsShared: processes that exec with the same environment
// share one parsed copy, and a copy no process holds goes at a prune.
func TestEnvironmentsShared(t *testing.T) {
	c, err := NewCollector(Config{Proc: fakeProc{cwd: map[int32]string{1: "/"}}})
	if err != nil {
		t.Fatal(err)
	}
	ccEnv := []byte("HOME=/root\x00COLLECT_GCC=cc\x00")
	c.Exec(1, 0, "/usr/bin/python3", []byte("HOME=/root\x00"))
	for pid := int32(2); pid < 12; pid++ {
		c.Fork(pid, 1)
		c.Exec(pid, 0, "/usr/bin/cc", ccEnv)
	}
	if len(c.envs) != 2 {
		t.Fatalf("%d parsed environments held for 2 distinct ones", len(c.envs))
	}
	if c.procs[2].env["COLLECT_GCC"] != "cc" || reflect.ValueOf(c.procs[2].env).UnsafePointer() != reflect.ValueOf(c.procs[11].env).UnsafePointer() {
		t.Errorf("pids 2 and 11 exec'd with one environment and hold different copies (or a wrong one: %v)", c.procs[2].env)
	}
	keep := func(pid int32) bool { return pid == 1 }
	c.Prune(keep, nil)
	if n := c.Prune(keep, nil); n != 10 {
		t.Fatalf("dropped %d of the 10 exited compilers", n)
	}
	if len(c.envs) != 1 || c.procs[1].env["HOME"] != "/root" {
		t.Errorf("after the compilers went: %d environments held (want python's only), python's %v", len(c.envs), c.procs[1].env)
	}
}
