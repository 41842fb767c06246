package main

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func TestReadyIsTheNamedMarkElseTheFirst(t *testing.T) {
	rec := &record.Record{WallNS: 10e9, Marks: []record.Mark{{AtNS: 4e9, Label: "up"}, {AtNS: 1e9, Label: "load"}}}
	markReady(rec, "", 0)
	if rec.Ready == nil || rec.Ready.AtNS != 1e9 || rec.Ready.By != `mark "load"` {
		t.Errorf("first mark: ready = %+v", rec.Ready)
	}
	rec.Ready = nil
	markReady(rec, "up", 0)
	if rec.Ready == nil || rec.Ready.AtNS != 4e9 {
		t.Errorf("--ready up: ready = %+v", rec.Ready)
	}
	rec.Ready = nil
	markReady(rec, "missing", 0)
	if rec.Ready != nil || len(rec.Warnings) != 1 {
		t.Errorf("--ready missing: ready = %+v, warnings %q", rec.Ready, rec.Warnings)
	}
}

func TestReadyInAnIdleSplitTraceIsTheEndOfTheFirstBusyStretch(t *testing.T) {
	busy := record.ThreadDelta{CPUNS: 90e6}
	var samples []record.Sample
	for i := int64(1); i <= 30; i++ {
		s := record.Sample{EndNS: i * 100e6}
		if i <= 5 || i > 20 { // busy 0–0.5 s and 2–3 s, idle between
			s.Threads = []record.ThreadDelta{busy}
		}
		samples = append(samples, s)
	}
	rec := &record.Record{WallNS: 3e9, Samples: samples}
	markReady(rec, "", 1e9)
	if rec.Ready == nil || rec.Ready.AtNS != 0.5e9 || rec.Ready.By != "the end of the first busy stretch" || len(rec.Marks) != 0 {
		t.Errorf("ready = %+v, marks %+v", rec.Ready, rec.Marks)
	}
	plain := &record.Record{WallNS: 3e9, Samples: samples}
	markReady(plain, "", 0)
	if plain.Ready != nil {
		t.Errorf("no marks, no split: ready = %+v", plain.Ready)
	}
}
