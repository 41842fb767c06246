package download

import (
	"os"
	"sort"

	"github.com/cilium/ebpf"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	"github.com/coldtrace/coldtrace/record"
)

// shrinkWalker makes the stack walker's maps of spec as small as they
// can be, when no walker is loaded (--no-stacks): they stay empty, so no
// walk runs.
func shrinkWalker(spec *ebpf.CollectionSpec) {
	for _, name := range []string{bpfdl.DownloadMapPyConfs, bpfdl.DownloadMapPyStacks, bpfdl.DownloadMapPyNatives} {
		if m := spec.Maps[name]; m != nil {
			m.MaxEntries = 1
		}
	}
	if m := spec.Maps[bpfdl.DownloadMapPyEvents]; m != nil {
		m.MaxEntries = uint32(os.Getpagesize())
	}
}

// downloadStacks names each download's connections' Python stacks (the
// connecting thread's, at connect) and charges each download's time and
// bytes to them: a connection's receive span and bytes to its stack.
func (s *Sensor) downloadStacks(rec *record.Record, conns []Conn) {
	if s.internStack == nil {
		return
	}
	type connID struct {
		pid       int32
		connectNS int64
	}
	stackOf := map[connID]uint64{}
	for _, c := range conns {
		if c.Stack != 0 {
			stackOf[connID{c.PID, rel(c.ID, s.startMono)}] = c.Stack
		}
	}
	for i := range rec.Downloads {
		d := &rec.Downloads[i]
		by := map[int]*record.StackCharge{}
		for j := range d.Connections {
			dc := &d.Connections[j]
			id, ok := stackOf[connID{dc.PID, dc.ConnectNS}]
			if !ok {
				continue
			}
			idx := s.internStack(rec, id)
			if idx == 0 {
				continue
			}
			dc.Stack = idx
			sc := by[idx]
			if sc == nil {
				sc = &record.StackCharge{Stack: idx, PID: dc.PID}
				if s.stackPID != nil {
					sc.PID = s.stackPID(id)
				}
				by[idx] = sc
			}
			sc.NS += max(dc.EndNS-dc.StartNS, 0)
			sc.Bytes += dc.Bytes
		}
		d.Stacks = d.Stacks[:0]
		for _, sc := range by {
			d.Stacks = append(d.Stacks, *sc)
		}
		sort.Slice(d.Stacks, func(a, b int) bool {
			if d.Stacks[a].NS != d.Stacks[b].NS {
				return d.Stacks[a].NS > d.Stacks[b].NS
			}
			return d.Stacks[a].Stack < d.Stacks[b].Stack
		})
		if len(d.Stacks) == 0 {
			d.Stacks = nil
		}
	}
}
