package pystack

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	bpfpy "github.com/coldtrace/coldtrace/bpf/pystack"
	"github.com/coldtrace/coldtrace/record"
)

// unknownFunc names a frame whose code object could not be read or had
// changed since the walk: never a guess.
const unknownFunc = "?"

// decodeStack reads stack id of process pid from the walker's table and
// decodes its frames while the process still runs them.
func (s *Sensor) decodeStack(pid uint32, id uint64) {
	var st bpfpy.PystackPyStack
	if err := s.objs.PyStacks.Lookup(id, &st); err != nil {
		return
	}
	p := s.procFor(pid)
	out := record.PyStack{Truncated: st.Truncated != 0}
	for _, i := range frameOrder(int(st.Total), len(st.Frames)) {
		if i < 0 {
			out.Omitted = int(st.Total) - keepInner - keepOuter
			out.Frames = append(out.Frames, record.PyFrame{Func: record.GapFunc})
			continue
		}
		out.Frames = append(out.Frames, s.decodeFrame(p, &st.Frames[i]))
	}
	s.intern(id, out)
}

// intern keeps stack out under id, once per distinct decoded stack.
func (s *Sensor) intern(id uint64, out record.PyStack) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := stackKey(out)
	idx, ok := s.byKey[key]
	if !ok {
		idx = len(s.stacks)
		s.stacks = append(s.stacks, out)
		s.byKey[key] = idx
	}
	s.byHash[id] = idx
}

// procFor is pid's located interpreter: a forked child of a Python
// process runs its parent's, located afresh on first use. The kernel
// walks only tracked processes, and the scheduler's exec program (which
// runs before the walker's) drops a process at a secure exec, so a stack
// never comes from a process that left the trace.
func (s *Sensor) procFor(pid uint32) *proc {
	s.mu.Lock()
	p := s.procs[pid]
	s.mu.Unlock()
	if p != nil {
		if !p.mem.alive() {
			return nil
		}
		return p
	}
	in, err := Locate(int(pid))
	if err != nil {
		return nil
	}
	p, err = s.install(pid, in)
	if err != nil {
		return nil
	}
	return p
}

func (s *Sensor) decodeFrame(p *proc, f *bpfpy.PystackPyFrame) record.PyFrame {
	key := FrameKey{Code: f.Code, Qualname: f.Qualname, Filename: f.Filename, FirstLineno: f.Firstlineno, NameTag: f.NameTag}
	c := s.codeFor(p, key)
	if c == nil {
		s.mu.Lock()
		s.unknown++
		s.mu.Unlock()
		return record.PyFrame{Func: unknownFunc}
	}
	return record.PyFrame{File: c.filename, Line: c.line(f.Instr), Func: c.qualname}
}

// codeFor is the decoded code object of key, read once per process and
// accepted only when it matches the walker's key.
func (s *Sensor) codeFor(p *proc, key FrameKey) *code {
	if p == nil {
		return nil
	}
	s.mu.Lock()
	c, ok := p.codes[key]
	s.mu.Unlock()
	if ok {
		return c
	}
	c, err := decodeCode(p.mem, &p.interp.Layout, p.interp.CodeType, key)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	if len(p.codes) < maxCodes {
		p.codes[key] = c
	}
	s.mu.Unlock()
	return c
}

// What a deep stack keeps: the innermost frames the walker's slots hold
// in order, and the outermost of the ring it writes past them.
const (
	keepInner = 64
	keepOuter = 16
)

// frameOrder is the order of the walker's slots innermost first for a
// stack of total frames in slots slots; -1 marks the gap of a deep one.
// Past the slots, frame k (k ≥ keepInner) lies in slot keepInner +
// (k-keepInner) mod (slots-keepInner).
func frameOrder(total, slots int) []int {
	if total <= slots {
		out := make([]int, total)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, keepInner+1+keepOuter)
	for i := 0; i < keepInner; i++ {
		out = append(out, i)
	}
	out = append(out, -1)
	ring := slots - keepInner
	for k := total - keepOuter; k < total; k++ {
		out = append(out, keepInner+(k-keepInner)%ring)
	}
	return out
}

func stackKey(st record.PyStack) string {
	var b strings.Builder
	for _, f := range st.Frames {
		fmt.Fprintf(&b, "%s\x00%d\x00%s\x00", f.File, f.Line, f.Func)
	}
	fmt.Fprintf(&b, "%d/%t", st.Omitted, st.Truncated)
	return b.String()
}

// Finish drains the ring, then writes the decoded stacks and each
// process's stack into the record (after the scheduler wrote processes).
func (s *Sensor) Finish(rec *record.Record) error {
	if s.rd != nil {
		if err := s.rd.Flush(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			s.rd.SetDeadline(time.Now())
		}
		select {
		case <-s.done:
		case <-time.After(2 * time.Second):
		}
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	used := map[int]int{} // index in s.stacks → index in rec.Stacks
	for i := range rec.Processes {
		p := &rec.Processes[i]
		id, ok := s.forks[uint32(p.PID)]
		if !ok {
			continue
		}
		idx, ok := s.byHash[id]
		if !ok {
			continue
		}
		out, ok := used[idx]
		if !ok {
			out = len(rec.Stacks)
			rec.Stacks = append(rec.Stacks, s.stacks[idx])
			used[idx] = out
		}
		p.Stack = out + 1
	}
	if _, _, dropped := s.counts(); dropped > 0 {
		s.notes = append(s.notes, fmt.Sprintf("python stacks: %d walks found the stack table full; their stacks are missing", dropped))
	}
	if s.unknown > 0 {
		s.notes = append(s.notes, fmt.Sprintf("python stacks: %d frames unreadable or changed since the walk (shown as ?)", s.unknown))
	}
	sort.Strings(s.notes)
	rec.Warnings = append(rec.Warnings, s.notes...)
	return nil
}

// Notes are what the sensor could not do (unsupported interpreters,
// unreadable frames), for the record's notes.
func (s *Sensor) Notes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}

// Counts are the walker's counters summed over CPUs: walks, new stacks,
// and stacks dropped for a full table.
func (s *Sensor) Counts() (walks, fresh, dropped uint64) {
	return s.counts()
}

func (s *Sensor) counts() (walks, fresh, dropped uint64) {
	get := func(k uint32) uint64 {
		var per []uint64
		if err := s.objs.PyLost.Lookup(k, &per); err != nil {
			return 0
		}
		var t uint64
		for _, v := range per {
			t += v
		}
		return t
	}
	base := uint32(bpfpy.PystackPyLostKindPY_LOST_KINDS)
	return get(base + uint32(bpfpy.PystackPyCountKindPY_WALKS)), get(base + uint32(bpfpy.PystackPyCountKindPY_NEW)),
		get(uint32(bpfpy.PystackPyLostKindPY_LOST_TABLE))
}

// ProcessStacks is the decoded stack each process was started from, by
// pid, as far as it is known now.
func (s *Sensor) ProcessStacks() map[int32]record.PyStack {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int32]record.PyStack{}
	for pid, id := range s.forks {
		if idx, ok := s.byHash[id]; ok {
			out[int32(pid)] = s.stacks[idx]
		}
	}
	return out
}
