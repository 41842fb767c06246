package trace

import (
	"context"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// TestForkBurstAfterIdle: the scheduler ring's reader slows down while no
// process starts or ends (a second of sleep), and a burst of processes
// after that loses none of their records: each is in the record, exited,
// and nothing was dropped.
func TestForkBurstAfterIdle(t *testing.T) {
	requireTracing(t)
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 600
	script := `sleep 1; i=0; while [ $i -lt 600 ]; do /bin/true & i=$((i+1)); done; wait`
	rec, err := Run(ctx, Options{Command: []string{"sh", "-c", script}, NoGPU: true, Actor: self})
	if err != nil {
		t.Fatal(err)
	}
	if lost := rec.Lost.Total(); lost != 0 {
		t.Errorf("%d events lost: %+v", lost, rec.Lost)
	}
	exited := 0
	for _, p := range rec.Processes {
		if p.Exited && p.Comm == "true" {
			exited++
		}
	}
	if exited != n {
		t.Errorf("%d exited true processes in the record, want %d (of %d processes)", exited, n, len(rec.Processes))
	}
}
