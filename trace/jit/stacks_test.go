package jit

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestCacheLookupsAreChargedToTheirStacks: a miss's compile time and the
// miss go to the stack of the lookup that missed, a hit to the stack of
// the lookup that found the entry; the in-process window carries the
// miss's stack, and compile calls from two stacks stay two windows.
func TestCacheLookupsAreChargedToTheirStacks(t *testing.T) {
	s := newScript(t, Config{})
	s.env(10, "TRITON_CACHE_DIR=/c", "HOME=/h")
	s.env(11, "TRITON_CACHE_DIR=/c")
	const missStack, hitStack, callA, callB = 0xa1, 0xb2, 0xc3, 0xd4
	file := func(pid int32, op Op, p string, flags uint32, ret int64, cpuMS uint64, stack uint64, p2 ...string) {
		s.ts += 1e6
		r := RawFile{TS: s.ts, PID: pid, TID: pid, Op: op, Dfd: AtFDCWD, Dfd2: AtFDCWD, Path: p, Flags: flags, Ret: ret,
			CPUNS: cpuMS * 1e6, Stack: stack}
		if len(p2) > 0 {
			r.Path2 = p2[0]
		}
		s.c.File(r)
	}
	key := "/c/KEY"
	file(10, OpLookup, key+"/__grp__k.json", 0, enoent, 1, missStack)
	file(10, OpMkdir, key+"/tmp.pid_10_0", 0, 0, 1, missStack)
	file(10, OpOpen, key+"/tmp.pid_10_0/k.so", wr, 3, 2, missStack)
	file(10, OpRename, key+"/tmp.pid_10_0/k.so", 0, 0, 30, missStack, key+"/k.so")
	file(11, OpOpen, key+"/k.so", rd, 3, 0, hitStack)
	s.c.Uprobe("libnvrtc:nvrtcCompileProgram", 10, 2e6, 3e6, 1e6, callA)
	s.c.Uprobe("libnvrtc:nvrtcCompileProgram", 10, 3e6, 4e6, 1e6, callB)

	names := map[uint64]int{missStack: 1, hitStack: 2, callA: 3, callB: 4}
	j, _ := s.c.Result(ResultInput{WallNS: int64(s.ts), FS: fakeFS{}, Intern: func(id uint64) int { return names[id] },
		StackPID: func(id uint64) int32 { return int32(id) }})
	c := cacheIn(t, j, "triton")
	want := []record.StackCharge{{Stack: 1, PID: missStack, NS: 29e6, Misses: 1}, {Stack: 2, PID: hitStack, Hits: 1}}
	if len(c.Stacks) != len(want) || c.Stacks[0] != want[0] || c.Stacks[1] != want[1] {
		t.Errorf("cache stacks %+v, want %+v", c.Stacks, want)
	}
	stacks := map[string][]int{}
	for _, w := range j.Windows {
		stacks[w.Kind] = append(stacks[w.Kind], w.Stack)
	}
	if got := stacks["in_process"]; len(got) != 1 || got[0] != 1 {
		t.Errorf("in-process windows' stacks %v, want [1]", got)
	}
	if got := stacks["uprobe"]; len(got) != 2 || got[0] == got[1] {
		t.Errorf("uprobe windows' stacks %v, want two windows, one per stack", got)
	}

	// Without a stack sensor nothing names a stack.
	j, _ = s.c.Result(ResultInput{WallNS: int64(s.ts), FS: fakeFS{}})
	if c := cacheIn(t, j, "triton"); c.Stacks != nil {
		t.Errorf("stacks without an interner: %+v", c.Stacks)
	}
}
