package uprobes

import "github.com/coldtrace/coldtrace/record"

// Snapshot adds nothing to a checkpoint: the Scoper's only part of a
// record is its warnings, and its lock is held while links are made
// (tens of milliseconds each under load), which a checkpoint taken
// between two polls must not wait for. The warnings are in the final
// record (Finish).
func (s *Scoper) Snapshot(*record.Record) error { return nil }
