package attribution

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestSliceJITKeepsPathSyscallSpans: a segment keeps the intervals with
// the path-syscall probes on that overlap it, clipped to it and counted
// from its start.
func TestSliceJITKeepsPathSyscallSpans(t *testing.T) {
	j := &record.JIT{PathSyscalls: "traced from +1s", PathSyscallSpans: []record.PathSyscallSpan{
		{FromNS: 1e9, ToNS: 3e9, Reason: "a", Off: "gone"},
		{FromNS: 5e9, ToNS: 9e9, Reason: "b"},
	}}
	got := sliceJIT(j, 2e9, 6e9).PathSyscallSpans
	want := []record.PathSyscallSpan{{FromNS: 0, ToNS: 1e9, Reason: "a", Off: "gone"}, {FromNS: 3e9, ToNS: 4e9, Reason: "b"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("spans %+v, want %+v", got, want)
	}
	if got := sliceJIT(j, 3e9, 5e9).PathSyscallSpans; len(got) != 0 {
		t.Errorf("a segment between the intervals keeps %+v", got)
	}
}
