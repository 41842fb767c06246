package advice

import (
	"strings"
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
	if want := "waiting on hub.example for 12.0 s from +2.0 s, nothing received; then 4.0 KiB arrived"; w[0].Sentence != want {
		t.Errorf("sentence %q, want %q", w[0].Sentence, want)
	}
	if !strings.Contains(w[1].Sentence, "10.0.0.2:443") || !strings.Contains(w[1].Sentence, "closed with nothing received") {
		t.Errorf("an unnamed peer's sentence: %q", w[1].Sentence)
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
	if want := "DNS took 1.5 s before the download of a.bin: resolving hub.example at +0.1 s"; got[0].Sentence != want {
		t.Errorf("sentence %q, want %q", got[0].Sentence, want)
	}
}
