package e2e

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
)

// TestCommandKeepsItsSchedulingPolicy: while the command runs,
// coldtrace's threads are under SCHED_BATCH (they stop preempting it on
// its CPU), and the command runs under the policy coldtrace was started
// with: SCHED_OTHER, or SCHED_BATCH and SCHED_FIFO given with chrt, which
// coldtrace then keeps for itself as well.
func TestCommandKeepsItsSchedulingPolicy(t *testing.T) {
	requireTracing(t)
	// The command prints its own policy, then coldtrace's threads'.
	script := `chrt -p $$ | sed -n 's/.*policy: //p'; for t in /proc/$PPID/task/*; do chrt -p "${t##*/}" | sed -n 's/.*policy: /ct /p'; done`
	for _, c := range []struct {
		name    string
		chrt    []string
		command string
		threads string
	}{
		{"default", nil, "SCHED_OTHER", "SCHED_BATCH"},
		{"batch", []string{"chrt", "-b", "0"}, "SCHED_BATCH", "SCHED_BATCH"},
		{"fifo", []string{"chrt", "-f", "10"}, "SCHED_FIFO", "SCHED_FIFO"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin, args := ctBin, []string{"-q", "--", "sh", "-c", script}
			if c.chrt != nil {
				bin, args = c.chrt[0], append(append(c.chrt[1:], ctBin), args...)
			}
			code, out, errOut := e2eutil.Run(t, bin, nil, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) < 2 || lines[0] != c.command {
				t.Fatalf("the command's policy: %q, want %s first", out, c.command)
			}
			for _, l := range lines[1:] {
				if l != "ct "+c.threads {
					t.Errorf("a coldtrace thread: %q, want %s (all: %q)", l, c.threads, out)
				}
			}
		})
	}
}
