package pagecache

import (
	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// sampleStacks follows the kernel's charges per (file, Python stack)
// poll by poll, so that a timeline slice can name the stack with the most
// time in its own interval rather than the file's over the whole run.
// Stacks are numbered in the order the polls first see them; the record
// maps the numbers to its interned stacks at the end (or a checkpoint),
// when every stack seen has had its time to be decoded.
type sampleStacks struct {
	num  map[uint64]int // kernel stack id → its number
	ids  []uint64       // number-1 → kernel stack id
	prev map[stackKey]int64
}

type stackKey struct {
	file  probe.FileKey
	stack uint64
}

// pollStacks adds to each file delta of sample that took time the stacks
// its time went to since the last poll. It reads the table only when a
// file took time: a poll of a run that only hits costs nothing more.
func (s *Sensor) pollStacks(sample *record.Sample) error {
	if s.opts.InternStack == nil || s.p.objs.FileStacks == nil {
		return nil
	}
	byID := map[int]int{} // file id → index in sample.Files
	for i, fd := range sample.Files {
		if fd.IOWaitNS > 0 || fd.MissCPUNS > 0 || fd.FillWaitNS > 0 {
			byID[fd.File] = i
		}
	}
	if len(byID) == 0 {
		return nil
	}
	st := &s.stacks
	if st.num == nil {
		st.num, st.prev = map[uint64]int{}, map[stackKey]int64{}
	}
	got := map[int][]record.SampleStack{}
	// s.polled: the file entries this poll read, first stacks and all.
	err := s.eachStackCharge(s.polled, func(file probe.FileKey, stack uint64, v *bpfpc.PagecacheFileStackStats) {
		key := stackKey{file, stack}
		acc := s.files[key.file]
		if acc == nil {
			return
		}
		i, ok := byID[acc.id]
		if !ok {
			return // charged after the file's counters were read: next poll
		}
		ns := int64(v.MissCpuNs + v.IowaitNs + v.FillWaitNs)
		d := ns - st.prev[key]
		if d <= 0 {
			return
		}
		st.prev[key] = ns
		n := st.num[stack]
		if n == 0 {
			st.ids = append(st.ids, stack)
			n = len(st.ids)
			st.num[stack] = n
		}
		got[i] = append(got[i], record.SampleStack{N: n, NS: d})
	})
	if err != nil {
		return err
	}
	for i, list := range got {
		record.SortSampleStacks(list)
		sample.Files[i].Stacks = list[:min(len(list), record.MaxSampleStacks):min(len(list), record.MaxSampleStacks)]
	}
	return nil
}

// sampleStackNames writes rec.SampleStacks: each stack number the
// samples use, named in rec's stacks.
func (s *Sensor) sampleStackNames(rec *record.Record) {
	if s.opts.InternStack == nil || len(s.stacks.ids) == 0 {
		return
	}
	names := make([]int, len(s.stacks.ids))
	for i, id := range s.stacks.ids {
		names[i] = s.opts.InternStack(rec, id)
	}
	rec.SampleStacks = names
}
