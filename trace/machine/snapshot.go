package machine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// Snapshot writes the machine's facts so far into rec, a checkpoint: the
// memory at the command's release and now (MemEnd is the checkpoint's
// reading), steal time and other processes' CPU time since the release,
// and the memory cgroups seen; the run goes on. It reads /proc/meminfo,
// /proc/stat and every process's stat (3–5 ms, once a checkpoint, a
// minute apart by default) and changes nothing the end of the run reads.
func (s *Sensor) Snapshot(rec *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := record.Machine{MemStart: s.m.MemStart}
	had := len(s.errs)
	s.measure(&m)
	// A failed reading is this checkpoint's warning, not the record's.
	errs := slices.Clone(s.errs[had:])
	s.errs = s.errs[:had]
	rec.Machine = &m
	if len(errs) > 0 {
		return fmt.Errorf("machine: %s", strings.Join(errs, "; "))
	}
	return nil
}
