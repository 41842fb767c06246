package pagecache

import (
	"fmt"
	"path/filepath"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/internal/fstype"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// minOrderMisses is the least number of misses a file needs for its read
// order to be kept in the record: fewer tell no pattern (ReadOrder.Order).
const minOrderMisses = 8

// readOrders copies the kernel's per-file miss order into the files of
// rec that missed often enough to show a pattern, with the filesystem
// each is on.
func (s *Sensor) readOrders(rec *record.Record) error {
	byKey := map[probe.FileKey]*record.File{}
	for i := range rec.Files {
		f := &rec.Files[i]
		byKey[probe.FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen}] = f
	}
	keys := make([]bpfpc.PagecacheFileKey, 256)
	vals := make([]bpfpc.PagecacheReadOrder, 256)
	err := probe.ReadMap(s.p.objs.ReadOrders, keys, vals, func(k bpfpc.PagecacheFileKey, o *bpfpc.PagecacheReadOrder) {
		f := byKey[probe.FileKey{Dev: k.Dev, Ino: k.Ino, Gen: k.Gen}]
		if f == nil || o.Misses < minOrderMisses {
			return
		}
		ro := &record.ReadOrder{Misses: o.Misses, FaultPages: o.FaultPages, ReadPages: o.ReadPages,
			Jumps: o.Jumps, SameStride: o.SameStride}
		if filepath.IsAbs(f.Path) {
			if magic, missing, err := fstype.Of(f.Path); err == nil && !missing {
				ro.FS = fstype.Name(magic)
			}
		}
		f.Order = ro
	})
	if err != nil {
		return fmt.Errorf("read the files' miss order: %w", err)
	}
	return nil
}
