package trace

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// TestThreadTimeUnderContention: processes that spin beside busy loops
// the trace does not follow are on a CPU or runnable all their lives,
// switched in and out hundreds of times. Under such load this kernel
// sometimes switches a thread out twice in a row without the switch in
// between reaching the sched_switch program; before the repair, each
// such switch lost a run and a wait (seen: 3-12 ms of a 0.3 s process in
// about one process of four). Each traced process's on- and off-CPU time
// must add up to at least its lifetime.
func TestThreadTimeUnderContention(t *testing.T) {
	requireTracing(t)
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		busy := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := busy.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = busy.Process.Signal(syscall.SIGKILL)
			_ = busy.Wait() // killed: its error says so
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Twenty children one after the other, each spinning for about
	// 0.15 s of CPU: runnable all their lives, preempted by the busy loops
	// every few milliseconds.
	const children = 20
	spin := `i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done`
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do bash -c '%s'; i=$((i+1)); done`, children, spin)
	rec, err := Run(ctx, Options{Command: []string{"sh", "-c", script}, NoGPU: true, NoJIT: true, Actor: self})
	if err != nil {
		t.Fatal(err)
	}
	if lost := rec.Lost.Total(); lost != 0 {
		t.Errorf("%d events lost: %+v", lost, rec.Lost)
	}
	t.Logf("switch-ins the program did not see: %d", rec.Self.SwitchInsUnseen)
	spinners := 0
	for _, p := range rec.Processes {
		if !p.Exited || p.Comm != "bash" || p.EndNS == 0 {
			continue
		}
		spinners++
		life := p.EndNS - p.StartNS
		for _, th := range rec.Threads {
			if th.TID != p.PID {
				continue
			}
			if total := th.CPUNS + th.OffCPUNS; total < life-time.Millisecond.Nanoseconds() {
				t.Errorf("process %d: on-CPU %v + off-CPU %v = %v, short of its lifetime %v", p.PID,
					time.Duration(th.CPUNS), time.Duration(th.OffCPUNS), time.Duration(total), time.Duration(life))
			}
		}
	}
	if spinners != children {
		t.Errorf("%d spinning processes in the record, want %d", spinners, children)
	}
}
