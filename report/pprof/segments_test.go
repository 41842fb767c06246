package pprof

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func TestSegmentLabel(t *testing.T) {
	const ms = int64(1e6)
	r := &record.Record{WallNS: 1000 * ms, IntervalNS: 100 * ms, Processes: []record.Process{{PID: 7, Comm: "server"}},
		Marks: []record.Mark{{AtNS: 200 * ms, Label: "round 1"}, {AtNS: 600 * ms, Label: "round 2"}}}
	for i := 1; i <= 10; i++ {
		r.Samples = append(r.Samples, record.Sample{EndNS: int64(i) * 100 * ms,
			Threads: []record.ThreadDelta{{TID: 7, PID: 7, CPUNS: 50 * ms, OtherWaitNS: 50 * ms}}})
	}
	p, err := Build(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	bySeg := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		if len(s.Label["segment"]) != 1 {
			t.Fatalf("sample without a segment label: %+v", s.Label)
		}
		bySeg[s.Label["segment"][0]] += s.Value[0]
		total += s.Value[0]
	}
	if total != r.WallNS {
		t.Errorf("wall values sum to %d, want %d", total, r.WallNS)
	}
	want := map[string]int64{"(before the first mark)": 200 * ms, "round 1": 400 * ms, "round 2": 400 * ms}
	for k, v := range want {
		if bySeg[k] != v {
			t.Errorf("segment %q: %d ns, want %d", k, bySeg[k], v)
		}
	}
}
