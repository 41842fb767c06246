package attribution_test

import (
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// TestFileTimeSplitsOverStacksByThreadTime: the file's part of the disk
// row is split over its stacks in proportion to their thread time, with
// the thread time beside it, and each call site is named by its
// innermost frame of the user's code.
func TestFileTimeSplitsOverStacksByThreadTime(t *testing.T) {
	r := stackedRead(3e9)
	res := attribution.Analyze(r)
	row := res.Row(attribution.DiskRead)
	if row == nil || len(row.Files) == 0 {
		t.Fatalf("no disk row: %+v", res.Breakdown)
	}
	fe := row.Files[0]
	if len(fe.Stacks) != 2 || fe.Stacks[0].Stack != 1 || fe.Stacks[0].ThreadNS != 3e9 || fe.Stacks[1].ThreadNS != 1e9 {
		t.Fatalf("stacks %+v", fe.Stacks)
	}
	if got := fe.Stacks[0].NS + fe.Stacks[1].NS; got != fe.NS || fe.Stacks[0].NS != 3*fe.Stacks[1].NS {
		t.Errorf("file %d ns split %d + %d", fe.NS, fe.Stacks[0].NS, fe.Stacks[1].NS)
	}
	sites := attribution.CallSiteTimes(r, res)
	if len(sites) != 2 || sites[0].Site != "load (main.py:12)" || sites[1].Site != "load_lora (main.py:20)" ||
		sites[0].Category != attribution.DiskRead || sites[0].NS != fe.Stacks[0].NS {
		t.Errorf("call sites %+v", sites)
	}
}

// TestInProcessCompileSplitsOverItsWindowsStacks: an in-process compile
// source's part of the compile row is split over its windows' stacks by
// their length, and each is a call site of the compile category.
func TestInProcessCompileSplitsOverItsWindowsStacks(t *testing.T) {
	r := stackedRead(3e9)
	r.Files, r.Samples = nil, []record.Sample{{EndNS: 4e9, Threads: []record.ThreadDelta{{TID: 7, PID: 7, CPUNS: 4e9}}}}
	r.WallNS = 4e9
	src := "libllvmlite:LLVMPY_FinalizeObject"
	r.JIT = &record.JIT{Windows: []record.JITWindow{
		{PID: 7, StartNS: 0, EndNS: 3e9, Kind: "uprobe", Source: src, Stack: 1},
		{PID: 7, StartNS: 3e9, EndNS: 4e9, Kind: "uprobe", Source: src, Stack: 2},
	}}
	res := attribution.Analyze(r)
	row := res.Row(attribution.JITCompile)
	if row == nil || len(row.Compilers) != 1 {
		t.Fatalf("compile row %+v", row)
	}
	ce := row.Compilers[0]
	if len(ce.Stacks) != 2 || ce.Stacks[0].Stack != 1 || ce.Stacks[0].ThreadNS != 3e9 || ce.Stacks[1].ThreadNS != 1e9 ||
		ce.Stacks[0].NS+ce.Stacks[1].NS != ce.NS || ce.Stacks[0].NS != 3*ce.Stacks[1].NS {
		t.Fatalf("%s: %d ns over stacks %+v", ce.Name, ce.NS, ce.Stacks)
	}
	sites := attribution.CallSiteTimes(r, res)
	if len(sites) != 2 || sites[0].Site != "load (main.py:12)" || sites[0].Category != attribution.JITCompile || sites[0].NS != ce.Stacks[0].NS {
		t.Errorf("call sites %+v", sites)
	}
}
