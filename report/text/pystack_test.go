package text

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
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
	if got := whereSection(r, nil); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	r.Stacks = nil
	if got := whereSection(r, nil); got != "" {
		t.Errorf("without stacks: %q", got)
	}
}

// TestWhereReadsSectionSplitsFilesByCallSite: a file's part of the disk
// reads is split over its stacks by thread time and summed per call site
// (over all files, then per hot file); the leaf package frame is shown.
func TestWhereReadsSectionSplitsFilesByCallSite(t *testing.T) {
	lib := record.PyFrame{File: "/venv/lib/python3.11/site-packages/safetensors/torch.py", Line: 311, Func: "load_file"}
	r := &record.Record{
		WallNS: 10e9,
		Stacks: []record.PyStack{
			{Frames: []record.PyFrame{lib, {File: "/src/main.py", Line: 12, Func: "load"}, {File: "/src/main.py", Line: 40, Func: "<module>"}}},
			{Frames: []record.PyFrame{{File: "/src/main.py", Line: 20, Func: "load_lora"}, {File: "/src/main.py", Line: 41, Func: "<module>"}}},
		},
		Files: []record.File{{ID: 0, Path: "/m/model.safetensors", PagesMissed: 100, BytesFromDisk: 400 << 10, IOWaitNS: 3e9, MissCPUNS: 1e9,
			Stacks: []record.StackCharge{{Stack: 1, PID: 7, NS: 3e9, Bytes: 300 << 10}, {Stack: 2, PID: 7, NS: 1e9, Bytes: 100 << 10}}}},
		Samples: []record.Sample{{EndNS: 10e9, Files: []record.FileDelta{{File: 0, PagesMissed: 100, IOWaitNS: 3e9, MissCPUNS: 1e9}},
			Threads: []record.ThreadDelta{{TID: 7, PID: 7, IOWaitNS: 3e9, MissCPUNS: 1e9, CPUNS: 1e9}}}},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 10e9}},
	}
	res := attribution.Analyze(r)
	got := whereReadsSection(r, res)
	for _, want := range []string{
		"where in the code: disk reads\n  main.py:12 load ← :40 <module> (in safetensors/torch.py:311 load_file)  3.0s, 300.0 KiB\n" +
			"  main.py:20 load_lora ← :41 <module>  1.0s, 100.0 KiB\n",
		"  /m/model.safetensors\n    main.py:12 load",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	r.Stacks = nil
	if got := whereReadsSection(r, res); got != "" {
		t.Errorf("without stacks: %q", got)
	}
}

// TestWhereSectionsNameInProcessCompilesAndCacheLookups: an in-process
// compile's time is named by its windows' call sites (no run count), and
// each cache's lookups by theirs: misses with their compile time, hits.
func TestWhereSectionsNameInProcessCompilesAndCacheLookups(t *testing.T) {
	frames := func(line int) []record.PyFrame {
		return []record.PyFrame{{File: "/src/jit.py", Line: line, Func: "compile_kernel"}, {File: "/src/jit.py", Line: 30, Func: "<module>"}}
	}
	r := &record.Record{
		WallNS:    4e9,
		Stacks:    []record.PyStack{{Frames: frames(7)}, {Frames: frames(12)}},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 4e9}},
		Samples:   []record.Sample{{EndNS: 4e9, Threads: []record.ThreadDelta{{TID: 7, PID: 7, CPUNS: 4e9}}}},
		JIT: &record.JIT{
			Windows: []record.JITWindow{{PID: 7, StartNS: 0, EndNS: 3e9, Kind: "in_process", Source: "numba", Stack: 1},
				{PID: 7, StartNS: 3e9, EndNS: 4e9, Kind: "in_process", Source: "numba", Stack: 2}},
			Caches: []record.Cache{{Name: "numba", Root: "/c", Misses: 1, Hits: 2, CompileNS: 3e9,
				Stacks: []record.StackCharge{{Stack: 1, NS: 3e9, Misses: 1}, {Stack: 2, Hits: 2}}}},
		},
	}
	res := attribution.Analyze(r)
	want := "where in the code: compiles\n" +
		"  jit.py:7 compile_kernel ← :30 <module>  3.0s in process\n" +
		"  jit.py:12 compile_kernel ← :30 <module>  1.0s in process\n"
	if got := whereSection(r, res); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	want = "where in the code: cache lookups\n  numba (/c)\n" +
		"    jit.py:7 compile_kernel ← :30 <module>  1 miss (3.0s compiling), 0 hits\n" +
		"    jit.py:12 compile_kernel ← :30 <module>  0 misses, 2 hits\n"
	if got := whereCachesSection(r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	r.Stacks = nil
	if got := whereCachesSection(r); got != "" {
		t.Errorf("without stacks: %q", got)
	}
}
