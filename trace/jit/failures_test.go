package jit

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// A Triton fill whose renames fail (a cache on NFS, or shared): the miss
// stays a miss, no entry is written, the compile is still charged to the
// cache, and the failed calls are counted by call and errno. A failed
// lookup (ENOENT open) and a racing creation (EEXIST) are no failures;
// a failed unlink and an open refused with EACCES are.
func TestFailedRenamesAreNotKept(t *testing.T) {
	const ebusy, eacces = -16, -13
	s := newScript(t, Config{})
	s.env(10, "TRITON_CACHE_DIR=/c")
	key := "/c/KEY"
	s.do(10, OpLookup, key+"/__grp__k.json", 0, enoent, 1)
	s.do(10, OpMkdir, key, 0, 0, 1)
	s.do(10, OpMkdir, key+"/tmp.pid_10_0", 0, 0, 1)
	s.do(10, OpOpen, key+"/tmp.pid_10_0/k.so", wr, 3, 2)
	s.do(10, OpRename, key+"/tmp.pid_10_0/k.so", 0, ebusy, 40, key+"/k.so")
	s.do(10, OpOpen, key+"/tmp.pid_10_0/__grp__k.json", wr, 3, 41)
	s.do(10, OpRename, key+"/tmp.pid_10_0/__grp__k.json", 0, ebusy, 42, key+"/__grp__k.json")
	s.do(10, OpUnlink, key+"/tmp.pid_10_0/k.so", 0, enoent, 43)
	s.do(10, OpOpen, "/c/OTHER/x.json", rd, eacces, 44)
	s.do(10, OpOpen, "/c/OTHER/y.json", excl, eexist, 44)
	c := cacheIn(t, s.result(), "triton")
	if got := counts(c); got != "lookups 1 hits 0 misses 1 written 0" {
		t.Errorf("triton: %s", got)
	}
	if c.CompileNS != 39e6 { // the lookup (1 ms) to the first failed rename (40 ms)
		t.Errorf("compile_ns %d", c.CompileNS)
	}
	want := []record.CacheFailure{
		{Op: "rename", Errno: "EBUSY", Count: 2, Path: key + "/k.so", PIDs: []int32{10}},
		{Op: "open", Errno: "EACCES", Count: 1, Path: "/c/OTHER/x.json", PIDs: []int32{10}},
		{Op: "unlink", Errno: "ENOENT", Count: 1, Path: key + "/tmp.pid_10_0/k.so", PIDs: []int32{10}},
	}
	if len(c.Failures) != len(want) {
		t.Fatalf("failures = %+v", c.Failures)
	}
	for i, f := range c.Failures {
		w := want[i]
		if f.Op != w.Op || f.Errno != w.Errno || f.Count != w.Count || f.Path != w.Path || len(f.PIDs) != 1 || f.PIDs[0] != 10 || f.FirstNS <= 0 {
			t.Errorf("failure %d = %+v, want %+v", i, f, w)
		}
	}

	// The same fill with renames that succeed: no failure.
	s = newScript(t, Config{})
	s.env(10, "TRITON_CACHE_DIR=/c")
	s.do(10, OpLookup, key+"/__grp__k.json", 0, enoent, 1)
	s.do(10, OpMkdir, key, 0, 0, 1)
	s.do(10, OpOpen, key+"/tmp.pid_10_0/k.so", wr, 3, 2)
	s.do(10, OpRename, key+"/tmp.pid_10_0/k.so", 0, 0, 40, key+"/k.so")
	c = cacheIn(t, s.result(), "triton")
	if len(c.Failures) != 0 || c.EntriesWritten != 1 {
		t.Errorf("a kept fill: %s, failures %+v", counts(c), c.Failures)
	}
}
