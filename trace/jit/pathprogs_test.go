package jit

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/sched"
)

// TestPathProgramsShareTheObjectsMaps: the path-syscall programs, loaded
// after the rest of the object, use its maps and data sections, and the
// programs loaded first use the scheduler's shared maps: no map of the
// object exists twice.
func TestPathProgramsShareTheObjectsMaps(t *testing.T) {
	testenv.RequireTracing(t)
	sc, err := sched.New(sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	e, err := New(Options{Shared: sc.Shared().Replacements()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	progs, err := e.pathProgs.get()
	if err != nil {
		t.Fatal(err)
	}
	own := map[ebpf.MapID]string{}
	add := func(name string, m *ebpf.Map) {
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		own[id] = name
	}
	for name, m := range probe.MapsByName(&e.objs.JitMaps) {
		add(name, m)
	}
	for _, m := range e.dataSections {
		add("data section", m)
	}
	shared := sc.Shared()
	for name, m := range map[string]*ebpf.Map{"task_states": shared.TaskStates, "threads": shared.Threads} {
		info, _ := m.Info()
		id, _ := info.ID()
		if own[id] != name {
			t.Errorf("the object's %s is not the scheduler's", name)
		}
	}
	for name, p := range map[string]*ebpf.Program{"on_path_exit": progs.OnPathExit, "on_path_enter3": progs.OnPathEnter3,
		"on_jit_exec": e.objs.OnJitExec, "on_jit_fork": e.objs.OnJitFork} {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		ids, ok := info.MapIDs()
		if !ok || len(ids) == 0 {
			t.Fatalf("%s: no map ids", name)
		}
		for _, id := range ids {
			if _, ok := own[id]; !ok {
				t.Errorf("%s uses map %d, not one of the object's (%v)", name, id, own)
			}
		}
	}
}
