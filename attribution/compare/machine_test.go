package compare

import (
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

func machineKinds(cs []MachineChange) map[string]MachineChange {
	m := map[string]MachineChange{}
	for _, c := range cs {
		m[c.Kind+"/"+c.Side] = c
	}
	return m
}

// cat-thrash read big.bin (64 MiB) three times under a 32 MiB memory
// cgroup limit beside two busy loops; cat-cold read it once, alone.
func TestMachineRereadAndContention(t *testing.T) {
	thrash, once := fixtures.Record(t, "cat-thrash"), fixtures.Record(t, "cat-cold")
	for _, c := range []struct {
		a, b *record.Record
		side string
	}{{thrash, once, "A"}, {once, thrash, "B"}} {
		got := machineKinds(New(c.a, c.b, nil, nil).Verdict.Machine)
		if len(got) != 2 {
			t.Fatalf("side %s: changes %+v, want a re-read and contention", c.side, got)
		}
		r, ok := got[MachineReread+"/"+c.side]
		if !ok || r.File != "/tmp/ctrec/big.bin" || r.Cause == nil || r.Cause.Kind != attribution.MemoryLimit || r.Cause.LimitBytes != 32<<20 {
			t.Errorf("side %s: re-read %+v", c.side, r)
		}
		thisF, otherF := r.AFactor, r.BFactor
		if c.side == "B" {
			thisF, otherF = otherF, thisF
		}
		if thisF != 3 || otherF != 1 {
			t.Errorf("side %s: factors %v (thrash) and %v (once), want 3 and 1", c.side, thisF, otherF)
		}
		k, ok := got[MachineContention+"/"+c.side]
		if !ok || k.Contention == nil || k.Contention.OthersCount != 2 || k.Contention.OthersCPUNS != 160e6 || k.ARunQueueNS == 0 || k.BRunQueueNS == 0 {
			t.Errorf("side %s: contention %+v", c.side, k)
		}
	}
	// Both runs thrashed alike: nothing differs.
	if m := New(thrash, thrash, nil, nil).Verdict.Machine; len(m) != 0 {
		t.Errorf("a run against itself: %+v", m)
	}
}

// cat-shared read big.bin while an untraced cat brought 48 MiB of it in,
// and an untraced python3 dropped 16 MiB of it with fadvise.
func TestMachineSharedReadAndEviction(t *testing.T) {
	shared, alone := fixtures.Record(t, "cat-shared"), fixtures.Record(t, "cat-cold")
	got := machineKinds(New(shared, alone, nil, nil).Verdict.Machine)
	s, ok := got[MachineSharedRead+"/A"]
	if !ok || s.Inserter == nil || s.Inserter.PID != 4121 || s.Bytes != 48<<20 || s.File != "/tmp/ctrec/big.bin" {
		t.Errorf("shared read %+v", s)
	}
	e, ok := got[MachineEvictedBy+"/A"]
	if !ok || e.Evictor == nil || e.Evictor.PID != 4200 || e.Evictor.Syscall != "fadvise64" || e.Bytes != 16<<20 {
		t.Errorf("evicted by %+v", e)
	}
	if len(got) != 2 {
		t.Errorf("changes %+v, want only the shared read and the eviction", got)
	}
	if m := New(shared, shared, nil, nil).Verdict.Machine; len(m) != 0 {
		t.Errorf("a run against itself: %+v", m)
	}
	// The fixtures without machine data have no machine changes.
	if m := New(fixtures.Record(t, "truth-cold"), fixtures.Record(t, "truth-warm"), nil, nil).Verdict.Machine; len(m) != 0 {
		t.Errorf("truth: %+v", m)
	}
}
