package pagecache

import (
	"fmt"
	"sort"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// fileStacks reads the kernel's charges per (file, Python stack) and
// hangs them on rec's files, naming each stack through the options'
// InternStack (the stack sensor's decoded stacks). Stacks it cannot name
// (never decoded) stay in the file's totals only.
func (s *Sensor) fileStacks(rec *record.Record, pageSize int) error {
	if s.opts.InternStack == nil || s.p.objs.FileStacks == nil {
		return nil
	}
	type charge struct {
		key   probe.FileKey
		stack uint64
		v     bpfpc.PagecacheFileStackStats
	}
	var all []charge
	// The files' first stacks as of the last poll (the run's end polls
	// last), as the files' own counters in rec are.
	err := s.eachStackCharge(s.polled, func(k probe.FileKey, stack uint64, v *bpfpc.PagecacheFileStackStats) {
		all = append(all, charge{k, stack, *v})
	})
	if err != nil {
		return err
	}
	byFile := map[probe.FileKey]int{}
	for i := range rec.Files {
		f := &rec.Files[i]
		byFile[probe.FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen}] = i
	}
	// Several walks (hashes) may decode to one stack: summed per file.
	type site struct {
		stack int
		pid   int32
	}
	merged := map[probe.FileKey]map[site]*record.StackCharge{}
	for _, c := range all {
		if _, ok := byFile[c.key]; !ok {
			continue
		}
		idx := s.opts.InternStack(rec, c.stack)
		if idx == 0 {
			continue
		}
		var pid int32
		if s.opts.StackPID != nil {
			pid = s.opts.StackPID(c.stack)
		}
		m := merged[c.key]
		if m == nil {
			m = map[site]*record.StackCharge{}
			merged[c.key] = m
		}
		sc := m[site{idx, pid}]
		if sc == nil {
			sc = &record.StackCharge{Stack: idx, PID: pid}
			m[site{idx, pid}] = sc
		}
		sc.MissCPUNS += int64(c.v.MissCpuNs)
		sc.IOWaitNS += int64(c.v.IowaitNs)
		sc.FillWaitNS += int64(c.v.FillWaitNs)
		sc.Bytes += c.v.Read * uint64(pageSize)
		sc.BytesFromDisk += c.v.Missed * uint64(pageSize)
	}
	for key, m := range merged {
		f := &rec.Files[byFile[key]]
		f.Stacks = f.Stacks[:0]
		for _, sc := range m {
			sc.NS = sc.MissCPUNS + sc.IOWaitNS + sc.FillWaitNS
			f.Stacks = append(f.Stacks, *sc)
		}
		SortCharges(f.Stacks)
	}
	return nil
}

// SortCharges orders charges by time, most first (then bytes, then
// stack, so that equal ones keep one order).
func SortCharges(cs []record.StackCharge) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].NS != cs[j].NS {
			return cs[i].NS > cs[j].NS
		}
		if cs[i].Bytes != cs[j].Bytes {
			return cs[i].Bytes > cs[j].Bytes
		}
		return cs[i].Stack < cs[j].Stack
	})
}

// eachStackCharge calls fn with the cumulative charges of every (file,
// Python stack): a file's first stack from its entry in files (as read
// into polled), then the rest from the kernel's file_stacks table.
func (s *Sensor) eachStackCharge(polled []polledFile, fn func(probe.FileKey, uint64, *bpfpc.PagecacheFileStackStats)) error {
	for i := range polled {
		if p := &polled[i]; p.stats.FirstStack != 0 {
			fn(p.key, p.stats.FirstStack, &p.stats.FirstCharges)
		}
	}
	if s.stackKeys == nil {
		s.stackKeys = make([]bpfpc.PagecacheFileStackKey, probe.BatchSize)
		s.stackVals = make([]bpfpc.PagecacheFileStackStats, probe.BatchSize)
	}
	err := probe.ReadMap(s.p.objs.FileStacks, s.stackKeys, s.stackVals, func(k bpfpc.PagecacheFileStackKey, v *bpfpc.PagecacheFileStackStats) {
		fn(probe.FileKey{Dev: k.File.Dev, Ino: k.File.Ino, Gen: k.File.Gen}, k.Stack, v)
	})
	if err != nil {
		return fmt.Errorf("read the files' stacks: %w", err)
	}
	return nil
}
