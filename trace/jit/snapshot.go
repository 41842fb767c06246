package jit

import "github.com/coldtrace/coldtrace/record"

// Snapshot writes the JIT section of what the reader has handled so far
// into rec, a checkpoint whose processes are filled in; the run goes on.
func (e *Sensor) Snapshot(rec *record.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	probes := e.probeStates()
	j, warns := e.col.Result(e.resultInput(rec, probes, DefaultFS))
	rec.JIT = j
	rec.Warnings = append(rec.Warnings, e.warnings...)
	rec.Warnings = append(rec.Warnings, warns...)
	rec.Self.EventsSeen += e.col.Seen
	return nil
}
