package advice

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// A silent connection is named with its host and length, and costs its
// length in the verdict's ranking.
func TestSilentWaitsNameHostAndLength(t *testing.T) {
	r := &record.Record{Silent: []record.SilentConnection{
		{Peer: "10.0.0.1:443", Host: "hub.example", StartNS: 2e9, LengthNS: 12e9, Received: true, Bytes: 4096},
		{Peer: "10.0.0.2:443", StartNS: 1e9, LengthNS: 11e9, Closed: true},
	}}
	w := SilentWaits(r)
	if len(w) != 2 {
		t.Fatalf("waits = %+v", w)
	}
	if w[0].Host != "hub.example" || !w[0].Received || w[0].Bytes != 4096 || w[0].Action == nil || w[0].Action.SavesNS != 12e9 {
		t.Errorf("first wait %+v", w[0])
	}
	if w[1].Host != "10.0.0.2:443" || !w[1].Closed || w[1].Received {
		t.Errorf("an unnamed peer's wait: %+v", w[1])
	}
	traps := Traps(Of(r, nil))
	if len(traps) != 2 || traps[0].Kind != "silent_connection" || traps[0].CostNS != 12e9 {
		t.Errorf("traps = %+v", traps)
	}
}

// Only lookups of a second or more are named, once each.
func TestSlowLookupsFloorAndOnce(t *testing.T) {
	slow := &record.Lookup{Host: "hub.example", StartNS: 1e8, LengthNS: 15e8}
	r := &record.Record{Downloads: []record.Download{
		{Name: "a.bin", Lookup: slow},
		{Name: "b.bin", Lookup: &record.Lookup{Host: "hub.example", StartNS: 1e8, LengthNS: 15e8}},
		{Name: "c.bin", Lookup: &record.Lookup{Host: "cdn.example", StartNS: 5e9, LengthNS: 9e8}},
	}}
	got := SlowLookups(r)
	if len(got) != 1 {
		t.Fatalf("slow lookups = %+v, want one", got)
	}
	if g := got[0]; g.Host != "hub.example" || g.Download != "a.bin" || g.StartNS != 1e8 || g.LengthNS != 15e8 || g.Action.SavesNS != 15e8 {
		t.Errorf("slow lookup %+v", g)
	}
}
