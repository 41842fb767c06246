package advice

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// A cache whose renames failed is named with the calls and errno, costs
// the compile windows of the failing process and the compilers it ran,
// and ranks in the verdict by them; one whose entries are mostly gone
// with no failure seen is inferred; one that lost a few entries is not
// named.
func TestBrokenCachesSeenAndInferred(t *testing.T) {
	r := &record.Record{
		Processes: []record.Process{{PID: 10, PPID: 1}, {PID: 11, PPID: 10}, {PID: 12, PPID: 1}},
		JIT: &record.JIT{
			Caches: []record.Cache{
				{Name: "triton", Framework: "Triton", Root: "/nfs/triton", EntriesWritten: 0, Failures: []record.CacheFailure{
					{Op: "rename", Errno: "EBUSY", Count: 12, PIDs: []int32{10}},
					{Op: "unlink", Errno: "ENOENT", Count: 1, PIDs: []int32{10}},
				}},
				{Name: "python", Framework: "Python bytecode", Root: "/nfs/pyc", EntriesWritten: 8, EntriesGone: 8, CompileNS: 4e8},
				{Name: "numba", Framework: "Numba", Root: "/home/u/nb", EntriesWritten: 10, EntriesGone: 1, CompileNS: 1e9},
			},
			Windows: []record.JITWindow{
				{PID: 11, StartNS: 1e9, EndNS: 3e9, Kind: "compiler", Source: "ptxas"},
				{PID: 10, StartNS: 2e9, EndNS: 4e9, Kind: "in_process", Source: "triton"},
				{PID: 12, StartNS: 5e9, EndNS: 9e9, Kind: "compiler", Source: "cc"},
			},
		},
	}
	b := BrokenCaches(r)
	if len(b) != 2 {
		t.Fatalf("broken = %+v, want triton and python", b)
	}
	if b[0].Cache != "triton" || b[0].CompileNS != 3e9 || b[0].Inferred {
		t.Errorf("triton: %+v (want 3 s of compiles: pid 10's and its child's, overlapping)", b[0])
	}
	if len(b[0].Failures) != 2 || b[0].Action == nil || b[0].Action.SavesNS != 3e9 {
		t.Errorf("triton: %+v", b[0])
	}
	if b[1].Cache != "python" || !b[1].Inferred || b[1].CompileNS != 4e8 || b[1].EntriesGone != 8 {
		t.Errorf("python: %+v", b[1])
	}
	traps := Traps(Of(r, nil))
	if len(traps) < 2 || traps[0].Kind != "broken_cache" || traps[0].CostNS != 3e9 {
		t.Errorf("traps = %+v", traps)
	}
}
