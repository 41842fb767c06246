package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// HasTracepoint says whether the kernel has the BTF tracepoint name (a
// kernel built without io_uring has none of io_uring's). kernel may be
// nil.
func HasTracepoint(kernel *btf.Cache, name string) (bool, error) {
	var spec *btf.Spec
	var err error
	if kernel != nil {
		spec, err = kernel.Kernel()
	} else {
		spec, err = btf.LoadKernelSpec()
	}
	if err != nil {
		return false, fmt.Errorf("kernel BTF: %w", err)
	}
	var td *btf.Typedef
	switch err := spec.TypeByName("btf_trace_"+name, &td); {
	case err == nil:
		return true, nil
	case errors.Is(err, btf.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("kernel BTF: tracepoint %s: %w", name, err)
	}
}

// StubProgram makes prog a program that does nothing, verified against a
// tracepoint every kernel coldtrace runs on has, for a kernel that lacks
// the one it was written for (whose types it names, which would fail its
// load and with it the whole object's). It is never attached.
func StubProgram(prog *ebpf.ProgramSpec) {
	prog.AttachTo = "mm_filemap_get_pages"
	prog.Instructions = asm.Instructions{
		asm.Mov.Imm(asm.R0, 0).WithSymbol(prog.Name),
		asm.Return(),
	}
}
