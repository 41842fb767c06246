package sched

import (
	"testing"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// TestLayout holds the Go types this package reads the kernel's data with
// to the BTF of the embedded object: a .go and a .o regenerated apart, or
// a type written by hand, fail here instead of misreading counters.
func TestLayout(t *testing.T) {
	spec, err := bpfsched.LoadSched()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"task_event": bpfsched.SchedTaskEvent{},
		"thread":     bpfsched.SchedThread{},
		"tstate":     bpfsched.SchedTstate{},
		"file_key":   bpfsched.SchedFileKey{},
	} {
		if err := probe.CheckLayout(spec.Types, name, v); err != nil {
			t.Error(err)
		}
	}
}
