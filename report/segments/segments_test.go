package segments

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

const ms = int64(1e6)

// marked is a run of 1 s: a disk read in its first 300 ms, then CPU,
// with marks at 0 and 500 ms.
func marked() *record.Record {
	r := &record.Record{WallNS: 1000 * ms, IntervalNS: 100 * ms,
		Files:     []record.File{{ID: 0, Path: "/models/model.safetensors"}},
		Processes: []record.Process{{PID: 7, Comm: "server"}},
		Attached:  &record.Attached{PIDs: []int32{7}, Processes: 1, Threads: 3},
		Marks:     []record.Mark{{AtNS: 0, Label: "round 1"}, {AtNS: 500 * ms, Label: "round 2"}}}
	for i := 1; i <= 10; i++ {
		s := record.Sample{EndNS: int64(i) * 100 * ms}
		if i <= 3 {
			s.Threads = []record.ThreadDelta{{TID: 7, PID: 7, IOWaitNS: 100 * ms}}
			s.Files = []record.FileDelta{{File: 0, PagesMissed: 100, IOWaitNS: 100 * ms}}
		} else {
			s.Threads = []record.ThreadDelta{{TID: 7, PID: 7, CPUNS: 100 * ms}}
		}
		r.Samples = append(r.Samples, s)
	}
	return r
}

func TestTextAndJSON(t *testing.T) {
	r := marked()
	segs := attribution.Options{}.AnalyzeSegments(r, attribution.Segments(r, attribution.SegmentOptions{}))
	var b bytes.Buffer
	b.WriteString(Attached(r) + "\n")
	if err := WriteText(&b, segs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"attached at +0; 1 process, 3 threads; what happened before is not known",
		"round 1", "round 2", "disk reads: model.safetensors", "+500ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteJSON(&b, segs); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Segments []JSON `json:"segments"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Segments) != 2 || doc.Segments[1].StartNS != 500*ms || doc.Segments[1].EndNS != 1000*ms {
		t.Fatalf("segments %+v", doc.Segments)
	}
	for _, row := range doc.Segments[1].Breakdown {
		if row.Category == attribution.DiskRead && row.NS != 0 {
			t.Errorf("round 2 has %d ns of disk reads; the read was in round 1", row.NS)
		}
	}
}
