package jit

import (
	"sync"

	"github.com/cilium/ebpf"

	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// startObjects are the parts of the JIT object loaded before the command
// starts: everything but the path-syscall programs, which no command
// needs before a process uses a framework (unless the command itself
// does: syscallsAtStart). Their verification was some 10 ms of CPU of
// every start; they load in the background once the command runs
// (Begin), or at once when needed before that.
type startObjects struct {
	bpfjit.JitMaps
	bpfjit.JitVariables
	OnJitExec      *ebpf.Program `ebpf:"on_jit_exec"`
	OnJitFork      *ebpf.Program `ebpf:"on_jit_fork"`
	OnUprobeEntry  *ebpf.Program `ebpf:"on_uprobe_entry"`
	OnUprobeReturn *ebpf.Program `ebpf:"on_uprobe_return"`
	// The data sections, which the path programs share.
	Bss    *ebpf.Map `ebpf:".bss"`
	Rodata *ebpf.Map `ebpf:".rodata"`
}

// pathObjects are the path-syscall programs.
type pathObjects struct {
	OnPathEnter1 *ebpf.Program `ebpf:"on_path_enter1"`
	OnPathEnter2 *ebpf.Program `ebpf:"on_path_enter2"`
	OnPathEnter3 *ebpf.Program `ebpf:"on_path_enter3"`
	OnPathEnter4 *ebpf.Program `ebpf:"on_path_enter4"`
	OnPathEnter5 *ebpf.Program `ebpf:"on_path_enter5"`
	OnPathExit   *ebpf.Program `ebpf:"on_path_exit"`
}

// pathPrograms loads the path-syscall programs once, on the maps the
// start's load made.
type pathPrograms struct {
	once sync.Once
	load func() (pathObjects, error) // nil once run
	objs pathObjects
	err  error
}

// newPathPrograms prepares the later load of spec's path programs on the
// maps (and data sections) of first; opts carries the kernel BTF.
func newPathPrograms(spec *ebpf.CollectionSpec, first *startObjects, opts *ebpf.CollectionOptions) *pathPrograms {
	maps := probe.MapsByName(first) // the data sections too
	kernel := opts.Cache
	return &pathPrograms{load: func() (pathObjects, error) {
		var p pathObjects
		err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: maps, Cache: kernel})
		if err != nil {
			return p, probe.LoadError("JIT path-syscall probes", err)
		}
		return p, nil
	}}
}

// get loads the programs if nothing did yet, and returns them.
func (p *pathPrograms) get() (pathObjects, error) {
	p.once.Do(func() {
		p.objs, p.err = p.load()
		p.load = nil // the spec and the kernel BTF go with it
	})
	return p.objs, p.err
}

// close waits for a load under way, forbids a later one, and closes the
// programs.
func (p *pathPrograms) close() error {
	p.once.Do(func() { p.load = nil })
	var first error
	for _, prog := range []*ebpf.Program{p.objs.OnPathEnter1, p.objs.OnPathEnter2, p.objs.OnPathEnter3,
		p.objs.OnPathEnter4, p.objs.OnPathEnter5, p.objs.OnPathExit} {
		if err := prog.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
