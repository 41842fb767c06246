package trace

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
)

// TestAttachSeedsEveryThread attaches to a Python process with 200
// threads: every thread is seeded, each one's CPU shows in the record,
// and a thread started after the attach is tracked by the kernel side.
func TestAttachSeedsEveryThread(t *testing.T) {
	requireTracing(t)
	script := `import threading, time, sys
def work():
    while True:
        for _ in range(20000): pass
        time.sleep(0.05)
for _ in range(200):
    threading.Thread(target=work, daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
threading.Thread(target=work, daemon=True, name="late").start()
time.sleep(30)
`
	cmd := exec.Command("/usr/bin/python3", "-c", script)
	stdin, err := cmd.StdinPipe()
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
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	a, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	rec, err := Attach(context.Background(), AttachOptions{
		Options:  Options{Actor: a, NoGPU: true, Notify: func(s string) { notes = append(notes, s) }},
		PIDs:     []int{cmd.Process.Pid},
		Duration: 1500 * time.Millisecond,
		OnAttached: func(record.Attached) {
			// The process starts one more thread once traced.
			if _, err := stdin.Write([]byte("go\n")); err != nil {
				t.Error(err)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("notes: %v", notes)
	if rec.Attached == nil || rec.Attached.Threads != 201 || rec.Attached.Processes != 1 {
		t.Fatalf("attached %+v, want 1 process, 201 threads", rec.Attached)
	}
	busy := 0
	for _, th := range rec.Threads {
		if th.PID == int32(cmd.Process.Pid) && th.CPUNS > 0 {
			busy++
		}
	}
	if busy < 201 {
		t.Errorf("%d threads with CPU time, want the 200 workers and the one started after the attach", busy)
	}
	if _, err := Attach(context.Background(), AttachOptions{Options: Options{Actor: a, NoGPU: true}, PIDs: []int{1 << 30}}); !errors.Is(err, ErrTarget) {
		t.Errorf("attach to no process: %v", err)
	}
}
