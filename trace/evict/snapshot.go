package evict

import "github.com/coldtrace/coldtrace/record"

// Snapshot writes each file's evictors and inserters as of the last poll
// into rec, a checkpoint whose files the page-cache sensor's snapshot
// wrote; the run goes on. The tables are those the last poll read, so a
// checkpoint costs no walk of the kernel's maps.
func (s *Sensor) Snapshot(rec *record.Record) error { return s.fill(rec) }
