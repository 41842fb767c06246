package advice

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// lateRecord is a 10 s run marked ready at 2 s and cut again at 5 s and
// 8 s, with the given compile windows.
func lateRecord(ws ...record.JITWindow) *record.Record {
	return &record.Record{WallNS: 10e9,
		Marks: []record.Mark{{AtNS: 2e9, Label: "ready"}, {AtNS: 5e9, Label: "req 2"}, {AtNS: 8e9, Label: "req 3"}},
		JIT:   &record.JIT{Windows: ws}}
}

func TestCompilesAfterReadyCountEachCompileOnce(t *testing.T) {
	r := lateRecord(
		record.JITWindow{PID: 1, StartNS: 1e9, EndNS: 1.5e9, Kind: "compiler", Source: "cc"},         // before ready
		record.JITWindow{PID: 1, StartNS: 3e9, EndNS: 4e9, Kind: "in_process", Source: "triton"},     // request 1
		record.JITWindow{PID: 2, StartNS: 3.2e9, EndNS: 3.8e9, Kind: "compiler", Source: "ptxas"},    // inside that fill
		record.JITWindow{PID: 1, StartNS: 3.5e9, EndNS: 4.5e9, Kind: "uprobe", Source: "libnvrtc:x"}, // overlaps, not inside
		record.JITWindow{PID: 1, StartNS: 8.5e9, EndNS: 8.7e9, Kind: "compiler", Source: "cc"},       // request 3
	)
	l := AfterReady(r)
	if l == nil || l.Compiles != 3 || l.CompileNS != 1.7e9 || l.ReadyNS != 2e9 || l.ReadyBy != `mark "ready"` {
		t.Fatalf("late = %+v", l)
	}
	if len(l.Segments) != 2 || l.Segments[0].Index != 1 || l.Segments[0].Compiles != 2 || l.Segments[0].CompileNS != 1.5e9 ||
		l.Segments[1].Index != 3 || l.Segments[1].Compiles != 1 || l.Segments[1].Sources[0] != "cc" {
		t.Fatalf("segments = %+v", l.Segments)
	}
	if l.Segments[0].Label != "ready" || len(l.Segments[0].Sources) != 2 || l.Segments[0].Sources[1] != "libnvrtc:x" {
		t.Errorf("segment 1 = %+v", l.Segments[0])
	}
	a := Of(r, nil)
	if len(a.Next) != 1 || a.Next[0].SavesNS != 1.7e9 {
		t.Errorf("next = %+v", a.Next)
	}
	if tr := Traps(a); len(tr) != 1 || tr[0].Kind != "compiles_after_ready" || tr[0].CostNS != 1.7e9 {
		t.Errorf("traps = %+v", tr)
	}
}

func TestNoReadyOrNoLateCompileIsNoFinding(t *testing.T) {
	early := record.JITWindow{PID: 1, StartNS: 1e9, EndNS: 1.9e9, Kind: "compiler", Source: "cc"}
	if l := AfterReady(lateRecord(early)); l != nil {
		t.Errorf("compile before ready: %+v", l)
	}
	r := lateRecord(record.JITWindow{PID: 1, StartNS: 3e9, EndNS: 4e9, Kind: "compiler", Source: "cc"})
	r.Marks = nil
	if l := AfterReady(r); l != nil {
		t.Errorf("no ready point: %+v", l)
	}
	// An older idle-split record: its first cut, at 0, is no ready point.
	r = lateRecord(record.JITWindow{PID: 1, StartNS: 3e9, EndNS: 4e9, Kind: "compiler", Source: "cc"})
	r.Marks = []record.Mark{{AtNS: 0, Label: "segment 1"}, {AtNS: 5e9, Label: "segment 2"}}
	if l := AfterReady(r); l != nil {
		t.Errorf("compile before the second idle cut: %+v", l)
	}
	// A stored ready point wins over the first mark.
	r = lateRecord(record.JITWindow{PID: 1, StartNS: 3e9, EndNS: 4e9, Kind: "compiler", Source: "cc"})
	r.Ready = &record.Ready{AtNS: 5e9, By: "the end of the first busy stretch"}
	if l := AfterReady(r); l != nil {
		t.Errorf("compile before the stored ready point: %+v", l)
	}
}

func TestBaselineRootIsWhereTheEntriesAre(t *testing.T) {
	a := numbaCache("/a", []string{"d_1/p.f-2.nbi"})
	b := numbaCache("/b", []string{"d_1/p.f-2.nbi"})
	r := &record.Record{JIT: &record.JIT{Caches: []record.Cache{b}}}
	if m := MissesWith(r, nil); len(m) != 1 || m[0].Reason != Cold {
		t.Fatalf("no baseline: %+v", m)
	}
	base := &record.Record{JIT: &record.JIT{Caches: []record.Cache{a}}}
	m := MissesWith(r, base)
	if len(m) != 1 || m[0].Reason != MovedRoot || len(m[0].EntriesAt) != 1 || m[0].EntriesAt[0].Path != "/a" || m[0].EntriesAt[0].Files != 2 ||
		m[0].Via != "NUMBA_CACHE_DIR" || m[0].Action == nil || m[0].ExportVar != "NUMBA_CACHE_DIR" || m[0].ExportValue != "/a" {
		t.Fatalf("baseline under /a: %+v", m)
	}
	tr := Traps(Of(r, base))
	if len(tr) != 1 || tr[0].Kind != "cache_not_used" || tr[0].CostNS != 40e6 {
		t.Errorf("traps = %+v", tr)
	}
	// The baseline under the same root is not another root.
	if m := MissesWith(r, &record.Record{JIT: &record.JIT{Caches: []record.Cache{b}}}); len(m) != 1 || m[0].Reason != Cold {
		t.Errorf("baseline under /b: %+v", m)
	}
}

func TestKeyChangeSaysWhatTheRegistryKeyIncludes(t *testing.T) {
	c := numbaCache("/c", []string{"d_1/p.f-2.nbi"})
	c.EntriesStale, c.KeyIncludes = 1, "the moon's phase"
	m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(m) != 1 || m[0].KeyIncludes != "the moon's phase" || m[0].Framework != "Numba" {
		t.Fatalf("misses = %+v", m)
	}
	c.KeyIncludes = ""
	if m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}}); !strings.Contains(m[0].KeyIncludes, "modification time") {
		t.Errorf("older record: %+v", m)
	}
}
