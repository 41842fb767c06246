package samples

import (
	"encoding/binary"
	"errors"

	"github.com/coldtrace/coldtrace/record"
)

// packed is a sample as the store holds it: its deltas as varints, the
// fields that are zero left out. A delta is 56–64 bytes as a struct and
// 6–16 as a packed one (a thread's CPU time and ids; a file's pages), and
// the samples are most of what a long run holds: the runtime keeps about
// twice the live heap, so every byte held is two of RSS.
type packed struct {
	end     int64
	threads int32
	files   int32
	b       []byte // never written once built
}

func (p packed) entries() int { return int(p.threads) + int(p.files) }

// pack encodes smp. Each delta is its ids, a byte whose bits say which of
// its counters are not zero, and those counters.
func pack(smp record.Sample) packed {
	p := packed{end: smp.EndNS, threads: int32(len(smp.Threads)), files: int32(len(smp.Files))}
	b := make([]byte, 0, 12*len(smp.Threads)+8*len(smp.Files))
	for i := range smp.Threads {
		t := &smp.Threads[i]
		b = binary.AppendVarint(b, int64(t.TID))
		b = binary.AppendVarint(b, int64(t.PID))
		b = appendFields(b, t.CPUNS, t.IOWaitNS, t.MissCPUNS, t.RunQueueNS, t.OtherWaitNS, t.FillWaitNS, t.FillRunQueueNS)
	}
	for i := range smp.Files {
		f := &smp.Files[i]
		b = binary.AppendVarint(b, int64(f.File))
		b = appendFields(b, int64(f.PagesAccessed), int64(f.PagesMissed), int64(f.PagesEvicted), f.IOWaitNS, f.MissCPUNS, f.FillWaitNS, f.DirectWaitNS, int64(f.PagesCreated))
		b = binary.AppendUvarint(b, uint64(len(f.Stacks)))
		for _, st := range f.Stacks {
			b = binary.AppendVarint(b, int64(st.N))
			b = binary.AppendVarint(b, st.NS)
		}
	}
	if cap(b) > len(b) {
		b = append([]byte(nil), b...)
	}
	p.b = b
	return p
}

// appendFields appends the mask of the non-zero values, then them. The
// unsigned counters go through int64 and come back bit for bit.
func appendFields(b []byte, v ...int64) []byte {
	var mask byte
	for i, x := range v {
		if x != 0 {
			mask |= 1 << i
		}
	}
	b = append(b, mask)
	for _, x := range v {
		if x != 0 {
			b = binary.AppendVarint(b, x)
		}
	}
	return b
}

var errCorrupt = errors.New("samples: corrupt packed sample")

// unpack decodes p into dst, reusing its slices' room; empty lists are
// nil, as the store keeps them. It panics only on the store's own bug.
func unpack(p packed, dst *record.Sample) {
	if err := unpackInto(p, dst); err != nil {
		panic(err)
	}
}

func unpackInto(p packed, dst *record.Sample) error {
	dst.EndNS = p.end
	dst.Threads, dst.Files = dst.Threads[:0], dst.Files[:0]
	b := p.b
	var v [8]int64
	next := func() (int64, bool) {
		x, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return x, true
	}
	fields := func(k int) bool {
		if len(b) == 0 {
			return false
		}
		mask := b[0]
		b = b[1:]
		for i := 0; i < k; i++ {
			v[i] = 0
			if mask&(1<<i) == 0 {
				continue
			}
			x, ok := next()
			if !ok {
				return false
			}
			v[i] = x
		}
		return true
	}
	for range p.threads {
		tid, ok1 := next()
		pid, ok2 := next()
		if !ok1 || !ok2 || !fields(7) {
			return errCorrupt
		}
		dst.Threads = append(dst.Threads, record.ThreadDelta{TID: int32(tid), PID: int32(pid), CPUNS: v[0], IOWaitNS: v[1],
			MissCPUNS: v[2], RunQueueNS: v[3], OtherWaitNS: v[4], FillWaitNS: v[5], FillRunQueueNS: v[6]})
	}
	for range p.files {
		id, ok := next()
		if !ok || !fields(8) {
			return errCorrupt
		}
		fd := record.FileDelta{File: int(id), PagesAccessed: uint64(v[0]), PagesMissed: uint64(v[1]),
			PagesEvicted: uint64(v[2]), IOWaitNS: v[3], MissCPUNS: v[4], FillWaitNS: v[5], DirectWaitNS: v[6], PagesCreated: uint64(v[7])}
		n, c := binary.Uvarint(b)
		if c <= 0 || n > record.MaxSampleStacks {
			return errCorrupt
		}
		b = b[c:]
		if n > 0 {
			// A slice of its own: a sample handed out is never written
			// by the store, nor is one decoded into dst's old room.
			fd.Stacks = make([]record.SampleStack, n)
			for i := range fd.Stacks {
				sn, ok1 := next()
				ns, ok2 := next()
				if !ok1 || !ok2 {
					return errCorrupt
				}
				fd.Stacks[i] = record.SampleStack{N: int(sn), NS: ns}
			}
		}
		dst.Files = append(dst.Files, fd)
	}
	if len(b) != 0 {
		return errCorrupt
	}
	if len(dst.Threads) == 0 {
		dst.Threads = nil
	}
	if len(dst.Files) == 0 {
		dst.Files = nil
	}
	return nil
}

// unpacked is p decoded into slices of its own, of their length.
func unpacked(p packed) record.Sample {
	s := record.Sample{Threads: make([]record.ThreadDelta, 0, p.threads), Files: make([]record.FileDelta, 0, p.files)}
	unpack(p, &s)
	return s
}
