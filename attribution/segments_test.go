package attribution

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/record"
)

// busyRecord is one thread sampled every 100 ms for wall; busy says
// whether it was on the CPU for all of sample i.
func busyRecord(wall int64, busy func(i int) bool) *record.Record {
	r := &record.Record{WallNS: wall, IntervalNS: 100 * ms}
	for i := 0; int64(i+1)*100*ms <= wall; i++ {
		s := record.Sample{EndNS: int64(i+1) * 100 * ms}
		if busy(i) {
			s.Threads = []record.ThreadDelta{{TID: 1, PID: 1, CPUNS: 100 * ms}}
		} else {
			s.Threads = []record.ThreadDelta{{TID: 1, PID: 1, CPUNS: ms / 10, OtherWaitNS: 100*ms - ms/10}}
		}
		r.Samples = append(r.Samples, s)
	}
	r.Processes = []record.Process{{PID: 1, Comm: "server"}}
	r.Threads = []record.Thread{{TID: 1, PID: 1, Comm: "server"}}
	return r
}

func TestSegmentsAtMarks(t *testing.T) {
	r := busyRecord(3000*ms, func(i int) bool { return i < 11 })
	r.Marks = []record.Mark{{AtNS: 2000 * ms, Label: "b"}, {AtNS: 500 * ms, Label: "a"}, {AtNS: 1050 * ms}}
	segs := Segments(r, SegmentOptions{})
	want := []Segment{{0, "(before the first mark)", 0, 500 * ms}, {1, "a", 500 * ms, 1050 * ms},
		{2, "mark 2", 1050 * ms, 2000 * ms}, {3, "b", 2000 * ms, 3000 * ms}}
	if len(segs) != len(want) {
		t.Fatalf("segments %+v, want %+v", segs, want)
	}
	for i := range want {
		if segs[i] != want[i] {
			t.Errorf("segment %d = %+v, want %+v", i, segs[i], want[i])
		}
	}
	res := Options{}.AnalyzeSegments(r, segs)
	cpu := []int64{500 * ms, 550 * ms, 50 * ms, 0}
	for i, s := range res {
		var sum int64
		for _, row := range s.Result.Breakdown {
			sum += row.NS
		}
		if sum != s.EndNS-s.StartNS {
			t.Errorf("segment %d rows sum to %d, want its wall %d", i, sum, s.EndNS-s.StartNS)
		}
		// The idle samples' 0.1 ms of CPU each stay CPU: allow for them.
		if got := s.Result.Row(CPU).NS; got < cpu[i] || got > cpu[i]+(s.EndNS-s.StartNS)/1000+ms {
			t.Errorf("segment %d CPU %v, want %v (the sample at 1.0–1.1 s is split at the mark)", i, time.Duration(got), time.Duration(cpu[i]))
		}
	}
	if _, err := PickSegment(segs, "b"); err != nil {
		t.Error(err)
	}
	if s, err := PickSegment(segs, "2"); err != nil || s.Label != "mark 2" {
		t.Errorf("PickSegment 2 = %+v, %v", s, err)
	}
	if _, err := PickSegment(segs, "7"); err == nil {
		t.Error("PickSegment 7: want an error")
	}
}

func TestSegmentsAtIdle(t *testing.T) {
	// Idle 0–0.5 s, busy 0.5–0.8, idle 0.8–1.8, busy 1.8–2.1, idle
	// 2.1–2.4 (too short), busy 2.4–2.6, idle to 4 s.
	busy := func(i int) bool { return (i >= 5 && i < 8) || (i >= 18 && i < 21) || (i >= 24 && i < 26) }
	r := busyRecord(4000*ms, busy)
	segs := Segments(r, SegmentOptions{SplitIdleNS: 500 * ms})
	if len(segs) != 2 || segs[0].StartNS != 0 || segs[1].StartNS != 1800*ms || segs[1].EndNS != 4000*ms {
		t.Fatalf("segments %+v: want a cut at 1.8 s only", segs)
	}
	if got := Segments(r, SegmentOptions{}); len(got) != 1 || got[0].EndNS != 4000*ms {
		t.Errorf("unmarked, no split: %+v", got)
	}
}

// TestSliceRecordTiles: two halves of each fixture, cut at a sample
// boundary, attribute to what the whole run does, category by category.
func TestSliceRecordTiles(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "records", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, p := range paths {
		r, err := record.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Samples) < 2 {
			continue
		}
		cut := r.Samples[len(r.Samples)/2-1].EndNS
		whole := Analyze(r)
		a, b := Analyze(SliceRecord(r, 0, cut)), Analyze(SliceRecord(r, cut, r.WallNS))
		if a.WallNS+b.WallNS != whole.WallNS {
			t.Errorf("%s: halves %d + %d, want %d", p, a.WallNS, b.WallNS, whole.WallNS)
		}
		for _, c := range []Category{DiskRead, CPU, OtherWait} {
			got, want := a.Row(c).NS+b.Row(c).NS, whole.Row(c).NS
			if d := got - want; d > r.IntervalNS || d < -r.IntervalNS {
				t.Errorf("%s %s: halves sum to %v, whole run %v", filepath.Base(p), c, time.Duration(got), time.Duration(want))
			}
		}
		var missed uint64
		for _, f := range SliceRecord(r, 0, cut).Files {
			missed += f.PagesMissed
		}
		for _, f := range SliceRecord(r, cut, r.WallNS).Files {
			missed += f.PagesMissed
		}
		var total uint64
		for _, s := range r.Samples {
			for _, fd := range s.Files {
				total += fd.PagesMissed
			}
		}
		if missed != total {
			t.Errorf("%s: halves missed %d pages, the samples %d", filepath.Base(p), missed, total)
		}
	}
}
