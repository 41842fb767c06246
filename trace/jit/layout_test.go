package jit

import (
	"testing"

	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// TestLayout holds the Go types the sensor decodes ring-buffer records
// with to the BTF of the embedded object.
func TestLayout(t *testing.T) {
	spec, err := bpfjit.LoadJit()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"file_event":   bpfjit.JitFileEvent{},
		"exec_event":   bpfjit.JitExecEvent{},
		"fork_event":   bpfjit.JitForkEvent{},
		"uprobe_event": bpfjit.JitUprobeEvent{},
	} {
		if err := probe.CheckLayout(spec.Types, name, v); err != nil {
			t.Error(err)
		}
	}
}
