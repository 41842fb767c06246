package pystack

import (
	"fmt"
	"slices"
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
	s.intern(pid, id, out)
}

// intern keeps stack out, walked in pid, under id, once per distinct
// decoded stack.
func (s *Sensor) intern(pid uint32, id uint64, out record.PyStack) {
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
	s.hashPID[id] = pid
}

// PIDOf is the process stack id was walked in, 0 when unknown.
func (s *Sensor) PIDOf(id uint64) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int32(s.hashPID[id])
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
		fmt.Fprintf(&b, "%s\x00%d\x00%s\x00%s\x00", f.File, f.Line, f.Func, f.Symbol)
	}
	fmt.Fprintf(&b, "%d/%t", st.Omitted, st.Truncated)
	return b.String()
}

// Finish drains the ring, then writes the decoded stacks and each
// process's stack into the record (after the scheduler wrote processes).
func (s *Sensor) Finish(rec *record.Record) error {
	if s.ring != nil {
		// What the walker queued before the command ended is decoded
		// (a drain that fails leaves those stacks as "?", as a full
		// ring would); later records, of processes left behind, are not
		// waited for.
		_ = s.ring.Drain(2 * time.Second)
		s.ring.Close()
		s.ring = nil
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nameLazyFrames()
	for i := range rec.Processes {
		p := &rec.Processes[i]
		if id, ok := s.forks[uint32(p.PID)]; ok {
			p.Stack = s.internLocked(rec, id)
		}
	}
	walks, fresh, dropped := s.counts()
	rec.Self.PyWalks, rec.Self.PyNewStacks, rec.Self.PyReuses = walks, fresh, s.reuses()
	if dropped > 0 {
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

// Reuses is how many stacks were taken again without a walk
// (py_stack_reuse): after the check of the two innermost frames, or of
// every frame's code and instruction (py_same_chain).
func (s *Sensor) Reuses() uint64 { return s.reuses() }

func (s *Sensor) reuses() uint64 {
	base := uint32(bpfpy.PystackPyLostKindPY_LOST_KINDS)
	return s.perCPU(base+uint32(bpfpy.PystackPyCountKindPY_REUSES)) + s.perCPU(base+uint32(bpfpy.PystackPyCountKindPY_CHAIN_REUSES))
}

func (s *Sensor) perCPU(k uint32) uint64 {
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

// Intern is 1 + the index in rec.Stacks of the decoded stack of stack id
// (a walk's hash), appended when rec does not hold it yet; 0 when the
// stack was never decoded. Other sensors' parts of the record (files,
// downloads) name their stacks with it, after Finish has drained the
// walker's records.
func (s *Sensor) Intern(rec *record.Record, id uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.internLocked(rec, id)
}

func (s *Sensor) internLocked(rec *record.Record, id uint64) int {
	idx, ok := s.byHash[id]
	if !ok {
		return 0
	}
	key := stackKey(s.stacks[idx])
	if s.internRec != rec || len(s.internIdx) != len(rec.Stacks) {
		// Another record (a checkpoint's), or one changed since.
		s.internRec = rec
		s.internIdx = make(map[string]int, len(rec.Stacks))
		for i, st := range rec.Stacks {
			s.internIdx[stackKey(st)] = i + 1
		}
	}
	if n, ok := s.internIdx[key]; ok {
		return n
	}
	rec.Stacks = append(rec.Stacks, s.stacks[idx])
	s.internIdx[key] = len(rec.Stacks)
	return len(rec.Stacks)
}

// Snapshot names each process's stack in rec, a checkpoint, as Finish
// does at the end (the files' stacks come from the page-cache sensor's
// snapshot); the run goes on.
func (s *Sensor) Snapshot(rec *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A checkpoint shares the session record's slices: written ones are
	// copies.
	rec.Stacks = slices.Clip(rec.Stacks)
	rec.Processes = slices.Clone(rec.Processes)
	for i := range rec.Processes {
		p := &rec.Processes[i]
		if id, ok := s.forks[uint32(p.PID)]; ok {
			p.Stack = s.internLocked(rec, id)
		}
	}
	return nil
}
