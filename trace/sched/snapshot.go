package sched

import (
	"fmt"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// Snapshot writes threads, processes and lost counters as of the last
// poll into rec, a checkpoint; the run goes on. It does not wait for the
// ring buffer (its reader drains it every 50 ms), so a checkpoint never
// holds up the polls.
func (s *Sensor) Snapshot(rec *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fill(rec)
	lost, err := probe.Lost(s.p.objs.Lost, bpfsched.SchedLostKindLOST_RINGBUF, bpfsched.SchedLostKindLOST_THREADS)
	if err != nil {
		return fmt.Errorf("sched: %w", err)
	}
	rec.Lost.RingBuffer += lost[bpfsched.SchedLostKindLOST_RINGBUF]
	rec.Lost.ThreadTable += lost[bpfsched.SchedLostKindLOST_THREADS]
	rec.Self.EventsSeen += s.seen
	return nil
}
