package machine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// Snapshot writes the machine's facts so far into rec, a checkpoint: the
// memory at the command's release and now (MemEnd is the checkpoint's
// reading), steal time since the release, and the memory cgroups seen;
// the run goes on. It reads /proc/meminfo and /proc/stat only, and
// changes nothing the end of the run reads. Other processes' CPU time is
// left to the end (Finish): it takes a scan of every process's stat,
// 3–5 ms and more under load, on the session's goroutine between two
// polls, which a checkpoint must not hold up.
func (s *Sensor) Snapshot(rec *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := record.Machine{MemStart: s.m.MemStart}
	had := len(s.errs)
	s.measure(&m, false)
	// A failed reading is this checkpoint's warning, not the record's.
	errs := slices.Clone(s.errs[had:])
	s.errs = s.errs[:had]
	rec.Machine = &m
	if len(errs) > 0 {
		return fmt.Errorf("machine: %s", strings.Join(errs, "; "))
	}
	return nil
}
