package words

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/record"
)

// finding is one finding and the sentence it renders to, whole or in
// part.
type finding struct {
	name     string
	f        advice.Finding
	want     string
	contains bool
}

func checkFindings(t *testing.T, cases []finding) {
	t.Helper()
	for _, c := range cases {
		got := Finding(c.f)
		if (c.contains && !strings.Contains(got, c.want)) || (!c.contains && got != c.want) {
			t.Errorf("%s: %q\nwant %q", c.name, got, c.want)
		}
	}
}

// A silent connection says its host, length and what came after; a
// slow lookup its host and the download it delayed.
func TestNetworkFindingsSaySo(t *testing.T) {
	w := advice.SilentWaits(&record.Record{Silent: []record.SilentConnection{
		{Peer: "10.0.0.1:443", Host: "hub.example", StartNS: 2e9, LengthNS: 12e9, Received: true, Bytes: 4096},
		{Peer: "10.0.0.2:443", StartNS: 1e9, LengthNS: 11e9, Closed: true},
	}})
	dns := advice.SlowLookups(&record.Record{Downloads: []record.Download{
		{Name: "a.bin", Lookup: &record.Lookup{Host: "hub.example", StartNS: 1e8, LengthNS: 15e8}},
	}})
	checkFindings(t, []finding{
		{"silent", w[0], "waiting on hub.example for 12.0 s from +2.0 s, nothing received; then 4.0 KiB arrived", false},
		{"silent closed", w[1], "waiting on 10.0.0.2:443 for 11.0 s from +1.0 s, nothing received; closed with nothing received", false},
		{"slow dns", dns[0], "DNS took 1.5 s before the download of a.bin: resolving hub.example at +0.1 s", false},
	})
	act, ev := Step(*w[0].Action)
	if !strings.HasPrefix(act, "the connection to hub.example: set a read timeout") || ev != Finding(w[0]) {
		t.Errorf("silent step %q, evidence %q", act, ev)
	}
	act, ev = Step(*dns[0].Action)
	if !strings.HasPrefix(act, "resolving hub.example: check the resolver") || ev != Finding(dns[0]) {
		t.Errorf("dns step %q, evidence %q", act, ev)
	}
}

// Fill renders every finding of an Advice and its next steps, and
// leaves the ranking as advice made it.
func TestFillRendersFindingsAndSteps(t *testing.T) {
	r := &record.Record{Silent: []record.SilentConnection{
		{Host: "a.example", StartNS: 1e9, LengthNS: 11e9},
		{Host: "b.example", StartNS: 1e9, LengthNS: 30e9},
	}}
	a := advice.Of(r, nil)
	Fill(&a)
	if len(a.Next) != 2 || a.Next[0].SavesNS != 30e9 || !strings.Contains(a.Next[0].Action, "b.example") ||
		a.Next[0].Evidence != a.Silent[1].Sentence || a.Silent[0].Sentence == "" {
		t.Errorf("filled advice %+v", a)
	}
	traps := advice.Traps(a)
	if len(traps) != 2 || traps[0].Sentence != a.Silent[1].Sentence || Finding(traps[0].Finding) != traps[0].Sentence {
		t.Errorf("traps %+v", traps)
	}
}
