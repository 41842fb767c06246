package text

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestWhereSectionGroupsCompilesByCallSite: compiler windows are grouped
// by the call site of their process's stack, most compile time first,
// each counting its compiler processes once; processes without a stack
// are left out, and a record without stacks has no section.
func TestWhereSectionGroupsCompilesByCallSite(t *testing.T) {
	frames := func(line int) []record.PyFrame {
		return []record.PyFrame{{File: "/usr/lib/python3.11/subprocess.py", Line: 1901, Func: "Popen._execute_child"},
			{File: "/src/build.py", Line: line, Func: "compile_kernel"}, {File: "/src/build.py", Line: 30, Func: "<module>"}}
	}
	r := &record.Record{
		Stacks:    []record.PyStack{{Frames: frames(7)}, {Frames: frames(12)}},
		Processes: []record.Process{{PID: 1, Stack: 1}, {PID: 2, Stack: 2}, {PID: 3, Stack: 2}, {PID: 4}},
		JIT: &record.JIT{Windows: []record.JITWindow{
			{PID: 1, Kind: "compiler", StartNS: 0, EndNS: 2e9},
			{PID: 2, Kind: "compiler", StartNS: 0, EndNS: 3e9},
			{PID: 2, Kind: "compiler", StartNS: 4e9, EndNS: 5e9},
			{PID: 3, Kind: "compiler", StartNS: 0, EndNS: 1e9},
			{PID: 4, Kind: "compiler", StartNS: 0, EndNS: 9e9},
			{PID: 1, Kind: "uprobe", StartNS: 0, EndNS: 9e9},
		}},
	}
	want := "where in the code: compiles\n" +
		"  build.py:12 compile_kernel ← :30 <module>  5.0s, 2 runs\n" +
		"  build.py:7 compile_kernel ← :30 <module>  2.0s, 1 run\n"
	if got := whereSection(r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	r.Stacks = nil
	if got := whereSection(r); got != "" {
		t.Errorf("without stacks: %q", got)
	}
}
