package timeline

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func TestMarksAreInstantEvents(t *testing.T) {
	const ms = int64(1e6)
	r := &record.Record{WallNS: 1000 * ms, IntervalNS: 100 * ms,
		Marks: []record.Mark{{AtNS: 250 * ms, Label: "round 1"}, {AtNS: 700 * ms, Label: "round 2"}}}
	var b bytes.Buffer
	if err := Write(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	marks, segs := map[string]float64{}, 0
	for _, e := range doc.TraceEvents {
		switch e["cat"] {
		case "mark":
			if e["ph"] != "i" || e["s"] != "g" {
				t.Errorf("mark event %v: want a global instant", e)
			}
			marks[e["name"].(string)] = e["ts"].(float64)
		case "segment":
			segs++
		}
	}
	if marks["round 1"] != 250000 || marks["round 2"] != 700000 {
		t.Errorf("marks %v", marks)
	}
	if segs != 3 {
		t.Errorf("%d segment slices, want 3", segs)
	}
}
