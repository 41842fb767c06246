package pprof

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestPythonFramesOutermostFirstWithModuleNames: a process's Python
// frames come outermost first, each named module.qualname (so no name is
// made only of <…>), with its source path and line; an unreadable frame
// is "?"; a process without a stack has none.
func TestPythonFramesOutermostFirstWithModuleNames(t *testing.T) {
	r := &record.Record{
		Processes: []record.Process{{PID: 10, Comm: "cc", Stack: 1}, {PID: 11, Comm: "as"}},
		Stacks: []record.PyStack{{Frames: []record.PyFrame{
			{File: "/src/spawn.py", Line: 4, Func: "run_compiler"},
			{Func: "?"},
			{File: "/src/spawn.py", Line: 19, Func: "<module>"},
		}}},
	}
	got := pythonFrames(r)
	want := []frame{{name: "spawn.<module>", file: "/src/spawn.py", line: 19}, {name: "?"},
		{name: "spawn.run_compiler", file: "/src/spawn.py", line: 4}}
	if len(got[10]) != len(want) {
		t.Fatalf("frames %+v, want %+v", got[10], want)
	}
	for i := range want {
		if got[10][i] != want[i] {
			t.Errorf("frame %d: %+v, want %+v", i, got[10][i], want[i])
		}
	}
	if _, ok := got[11]; ok {
		t.Errorf("a process without a stack got frames %+v", got[11])
	}
}

// TestNativeLeafNamedBySymbol: a native leaf is named by its function
// alone (no module prefix made of its file name), in its ELF file.
func TestNativeLeafNamedBySymbol(t *testing.T) {
	r := &record.Record{
		Processes: []record.Process{{PID: 10, Comm: "cc", Stack: 1}},
		Stacks:    []record.PyStack{{Frames: []record.PyFrame{{File: "/usr/lib/x86_64-linux-gnu/libc.so.6", Func: "vfork", Native: true}}}},
	}
	got := pythonFrames(r)[10]
	if len(got) != 1 || got[0] != (frame{name: "vfork", file: "/usr/lib/x86_64-linux-gnu/libc.so.6"}) {
		t.Errorf("frames %+v, want vfork in libc.so.6", got)
	}
}
