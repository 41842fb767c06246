package pagecache

import (
	"fmt"
	"slices"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// Snapshot writes the files and lost counters as of the last poll into
// rec, a checkpoint; the run goes on.
func (s *Sensor) Snapshot(rec *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A checkpoint may read the mount table again for a path; the end of
	// the run must still be allowed to, for mounts made after it.
	reread := s.mountsReread
	s.fill(rec, rec.Host.PageSize)
	s.mountsReread = reread
	// A checkpoint shares the session record's stacks and warnings:
	// added ones go to a copy.
	rec.Stacks = slices.Clip(rec.Stacks)
	rec.Warnings = slices.Clip(rec.Warnings)
	if err := s.fileStacks(rec, rec.Host.PageSize); err != nil {
		rec.Warnings = append(rec.Warnings, "pagecache: "+err.Error())
	}
	s.sampleStackNames(rec)
	lost, err := probe.Lost(s.p.objs.Lost, bpfpc.PagecacheLostKindLOST_RINGBUF, bpfpc.PagecacheLostKindLOST_FILES,
		bpfpc.PagecacheLostKindLOST_FILL_END, bpfpc.PagecacheLostKindLOST_PAGES)
	if err != nil {
		return fmt.Errorf("pagecache: %w", err)
	}
	rec.Lost.RingBuffer += lost[bpfpc.PagecacheLostKindLOST_RINGBUF]
	rec.Lost.FileTable += lost[bpfpc.PagecacheLostKindLOST_FILES]
	rec.Lost.FillEnds += lost[bpfpc.PagecacheLostKindLOST_FILL_END]
	rec.Lost.Pages += lost[bpfpc.PagecacheLostKindLOST_PAGES]
	s.fillEnds(rec)
	if w := fillEndWarning(rec.FillEnd); w != "" {
		rec.Warnings = append(rec.Warnings, w)
	}
	rec.Self.EventsSeen += s.seen
	return nil
}
