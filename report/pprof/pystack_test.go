package pprof

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
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

// TestFileStacksHangUnderTheirProcess: a file's time charged to Python
// stacks hangs under category → file → process → the stack's frames,
// outermost first, with the stack's share of the file's time; the
// samples still sum to the wall time.
func TestFileStacksHangUnderTheirProcess(t *testing.T) {
	r := &record.Record{
		WallNS: 10e9,
		Stacks: []record.PyStack{
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 12, Func: "load"}, {File: "/src/main.py", Line: 40, Func: "<module>"}}},
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 20, Func: "load_lora"}, {File: "/src/main.py", Line: 41, Func: "<module>"}}},
		},
		Files: []record.File{{ID: 0, Path: "/m/w.bin", PagesMissed: 100, BytesFromDisk: 400 << 10, IOWaitNS: 3e9, MissCPUNS: 1e9,
			Stacks: []record.StackCharge{{Stack: 1, PID: 7, NS: 3e9, Bytes: 300 << 10, BytesFromDisk: 300 << 10},
				{Stack: 2, PID: 7, NS: 1e9, Bytes: 100 << 10, BytesFromDisk: 100 << 10}}}},
		Samples: []record.Sample{{EndNS: 10e9, Files: []record.FileDelta{{File: 0, PagesMissed: 100, IOWaitNS: 3e9, MissCPUNS: 1e9}},
			Threads: []record.ThreadDelta{{TID: 7, PID: 7, IOWaitNS: 3e9, MissCPUNS: 1e9, CPUNS: 1e9}}}},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 10e9}},
	}
	p, err := Build(r, attribution.Analyze(r))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		total += s.Value[0]
		var names []string
		for i := len(s.Location) - 1; i >= 0; i-- {
			l := s.Location[i].Line[0]
			if l.Function.Name == "" {
				t.Errorf("a location without a function name")
			}
			names = append(names, fmt.Sprintf("%s:%d", l.Function.Name, l.Line))
		}
		got[strings.Join(names, " > ")] += s.Value[0]
	}
	if total != r.WallNS {
		t.Errorf("samples sum to %d, want %d", total, r.WallNS)
	}
	load := got["disk reads:0 > /m/w.bin:0 > python3[7]:0 > main.<module>:40 > main.load:12"]
	lora := got["disk reads:0 > /m/w.bin:0 > python3[7]:0 > main.<module>:41 > main.load_lora:20"]
	if load <= 0 || lora <= 0 || load != 3*lora {
		t.Errorf("load %d ns, load_lora %d ns; samples:\n%v", load, lora, got)
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

// TestDemangledNativeLeafKeepsItsLinkageName: a C++ leaf shows under its
// demangled name; its Function's system name is the ELF's linkage name,
// and two functions of one demangled name (overloads) stay two.
func TestDemangledNativeLeafKeepsItsLinkageName(t *testing.T) {
	bin := "/opt/app/spawner"
	r := &record.Record{
		Processes: []record.Process{{PID: 10, Comm: "spawner", Stack: 1}, {PID: 11, Comm: "spawner", Stack: 2}},
		Stacks: []record.PyStack{
			{Frames: []record.PyFrame{{File: bin, Func: "loader::spawn", Symbol: "_ZN6loader5spawnEv", Native: true}}},
			{Frames: []record.PyFrame{{File: bin, Func: "loader::spawn", Symbol: "_ZN6loader5spawnEi", Native: true}}},
		},
	}
	b := newBuilder(r, &attribution.Result{})
	f10, f11 := b.location(b.pyFrames[10][0]).Line[0].Function, b.location(b.pyFrames[11][0]).Line[0].Function
	if f10.Name != "loader::spawn" || f10.SystemName != "_ZN6loader5spawnEv" || f10.Filename != bin {
		t.Errorf("function %+v, want loader::spawn (system name _ZN6loader5spawnEv) in %s", f10, bin)
	}
	if f10 == f11 || f11.SystemName != "_ZN6loader5spawnEi" {
		t.Errorf("the two overloads' functions: %+v and %+v, want two", f10, f11)
	}
}

// TestInProcessCompileStacksHangUnderTheCache: an in-process compile of
// a cache charged to its windows' stacks hangs under category → cache →
// process → the stack's frames, in proportion to the windows' time.
func TestInProcessCompileStacksHangUnderTheCache(t *testing.T) {
	r := &record.Record{
		WallNS: 4e9,
		Stacks: []record.PyStack{
			{Frames: []record.PyFrame{{File: "/src/jit.py", Line: 7, Func: "compile_kernel"}, {File: "/src/jit.py", Line: 30, Func: "<module>"}}},
			{Frames: []record.PyFrame{{File: "/src/jit.py", Line: 12, Func: "warm"}, {File: "/src/jit.py", Line: 31, Func: "<module>"}}},
		},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 4e9}},
		Samples:   []record.Sample{{EndNS: 4e9, Threads: []record.ThreadDelta{{TID: 7, PID: 7, CPUNS: 4e9}}}},
		JIT: &record.JIT{
			Windows: []record.JITWindow{{PID: 7, StartNS: 0, EndNS: 3e9, Kind: "in_process", Source: "numba", Stack: 1},
				{PID: 7, StartNS: 3e9, EndNS: 4e9, Kind: "in_process", Source: "numba", Stack: 2}},
			Caches: []record.Cache{{Name: "numba", Root: "/c", Misses: 2, CompileNS: 4e9}},
		},
	}
	p, err := Build(r, attribution.Analyze(r))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, s := range p.Sample {
		var names []string
		for i := len(s.Location) - 1; i >= 0; i-- {
			l := s.Location[i].Line[0]
			names = append(names, fmt.Sprintf("%s:%d", l.Function.Name, l.Line))
		}
		got[strings.Join(names, " > ")] += s.Value[0]
	}
	first := got["JIT compile:0 > numba cache (in-process JIT):0 > python3[7]:0 > jit.<module>:30 > jit.compile_kernel:7"]
	second := got["JIT compile:0 > numba cache (in-process JIT):0 > python3[7]:0 > jit.<module>:31 > jit.warm:12"]
	if first <= 0 || second <= 0 || first != 3*second {
		t.Errorf("compile_kernel %d ns, warm %d ns; samples:\n%v", first, second, got)
	}
}
