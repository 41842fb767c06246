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

// A segment keeps the intervals with the read exits on that overlap it,
// clipped and counted from its start, and when they first went on in it;
// an interval still on at the segment's end did not come off in it. A
// record with only the first start keeps it, clipped.
func TestSliceRecordKeepsReadExitSpans(t *testing.T) {
	r := &record.Record{WallNS: 10e9, ReadExitSpans: []record.ReadExitSpan{
		{FromNS: 1e9, ToNS: 3e9, Off: "quiet"},
		{FromNS: 5e9, ToNS: 7e9, Off: "quiet"},
	}}
	first := int64(1e9)
	r.ReadExitsFromNS = &first
	got := SliceRecord(r, 2e9, 6e9)
	want := []record.ReadExitSpan{{FromNS: 0, ToNS: 1e9, Off: "quiet"}, {FromNS: 3e9, ToNS: 4e9}}
	if len(got.ReadExitSpans) != 2 || got.ReadExitSpans[0] != want[0] || got.ReadExitSpans[1] != want[1] {
		t.Errorf("spans %+v, want %+v", got.ReadExitSpans, want)
	}
	if got.ReadExitsFromNS == nil || *got.ReadExitsFromNS != 0 {
		t.Errorf("read_exits_from_ns %v, want 0", got.ReadExitsFromNS)
	}
	if got := SliceRecord(r, 3e9, 5e9); len(got.ReadExitSpans) != 0 || got.ReadExitsFromNS != nil {
		t.Errorf("a segment between the intervals keeps %+v from %v", got.ReadExitSpans, got.ReadExitsFromNS)
	}
	old := &record.Record{WallNS: 10e9, ReadExitsFromNS: &first}
	if got := SliceRecord(old, 4e9, 6e9); got.ReadExitsFromNS == nil || *got.ReadExitsFromNS != 0 || got.ReadExitSpans != nil {
		t.Errorf("an older record's segment: from %v, spans %+v; want from 0", got.ReadExitsFromNS, got.ReadExitSpans)
	}
	if got := SliceRecord(old, 0, 5e8); got.ReadExitsFromNS != nil {
		t.Errorf("a segment before they went on: from %d", *got.ReadExitsFromNS)
	}
}

// A segment keeps the intervals in which the program at the return to
// user space was on as it keeps the read exits'.
func TestSliceRecordKeepsRseqReturnSpans(t *testing.T) {
	r := &record.Record{WallNS: 10e9, RseqReturnSpans: []record.ReadExitSpan{
		{FromNS: 1e9, ToNS: 3e9, Off: "quiet"},
		{FromNS: 5e9, ToNS: 10e9},
	}}
	got := SliceRecord(r, 2e9, 6e9).RseqReturnSpans
	want := []record.ReadExitSpan{{FromNS: 0, ToNS: 1e9, Off: "quiet"}, {FromNS: 3e9, ToNS: 4e9}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("spans %+v, want %+v", got, want)
	}
	if got := SliceRecord(r, 3e9, 5e9).RseqReturnSpans; len(got) != 0 {
		t.Errorf("a segment between the intervals keeps %+v", got)
	}
}
