package samples

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// Packing keeps every field bit for bit: zero and non-zero, negative
// times, counters past int64, empty lists (nil after, as the store keeps
// them).
func TestPackRoundTrip(t *testing.T) {
	cases := []record.Sample{
		{EndNS: 0},
		{EndNS: 100 * ms, Threads: []record.ThreadDelta{{TID: 1, PID: 1}}},
		{EndNS: math.MaxInt64, Files: []record.FileDelta{{File: 0, PagesAccessed: math.MaxUint64}}},
		{EndNS: -5, Threads: []record.ThreadDelta{
			{TID: math.MaxInt32, PID: -1, CPUNS: 1, IOWaitNS: -2, MissCPUNS: math.MinInt64, RunQueueNS: math.MaxInt64,
				OtherWaitNS: 7, FillWaitNS: 1 << 40, FillRunQueueNS: 3},
			{TID: 2, PID: 2, OtherWaitNS: 9}},
			Files: []record.FileDelta{
				{File: 1 << 30, PagesAccessed: 1, PagesMissed: 2, PagesEvicted: 3, IOWaitNS: 4, MissCPUNS: -5, FillWaitNS: 6},
				{File: 3, FillWaitNS: 1}}},
	}
	var reused record.Sample
	for i, c := range cases {
		p := pack(c)
		if p.entries() != len(c.Threads)+len(c.Files) {
			t.Errorf("case %d: %d entries", i, p.entries())
		}
		if got := unpacked(p); !reflect.DeepEqual(got, c) {
			t.Errorf("case %d: unpacked %+v, want %+v", i, got, c)
		}
		unpack(p, &reused)
		if !reflect.DeepEqual(reused, c) {
			t.Errorf("case %d: unpacked into a reused sample %+v, want %+v", i, reused, c)
		}
		if len(p.b) > 0 && unpackInto(packed{end: p.end, threads: p.threads, files: p.files, b: p.b[:len(p.b)-1]}, &reused) == nil {
			t.Errorf("case %d: a truncated sample decoded", i)
		}
	}
	// What a poll of this package's tests holds: two thread and two file
	// deltas, 240 bytes as structs.
	if n := len(pack(poll(2)).b); n > 40 {
		t.Errorf("a poll packs into %d bytes", n)
	}
}

// A view is fixed when taken: the store's later polls and coarsening
// leave it as it was, and its samples stream as Samples returns them.
func TestViewFixed(t *testing.T) {
	st := New(Limits{HeadPolls: 4, HeadEntries: 1 << 20, TailSamples: 8, TailEntries: 1 << 20})
	for i := 1; i <= 21; i++ {
		st.Add(poll(i))
	}
	v := st.View()
	want := st.Samples()
	for i := 22; i <= 400; i++ {
		st.Add(poll(i))
	}
	if v.Len() != len(want) {
		t.Fatalf("view of %d samples, want %d", v.Len(), len(want))
	}
	var got []record.Sample
	if err := v.Each(func(s *record.Sample) error {
		got = append(got, record.Sample{EndNS: s.EndNS, Threads: slices.Clone(s.Threads), Files: slices.Clone(s.Files)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(v.Samples(), want) {
		t.Errorf("the view changed after later polls:\n got %+v\nwant %+v", got, want)
	}
	// Encoded from the stream, the record is the one with the samples
	// in place.
	var a, b bytes.Buffer
	if err := record.Encode(&a, &record.Record{Schema: record.Schema, Samples: want}); err != nil {
		t.Fatal(err)
	}
	if err := record.Encode(&b, &record.Record{Schema: record.Schema, SampleStream: v}); err != nil {
		t.Fatal(err)
	}
	ra, err := record.Decode(&a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := record.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("streamed samples decode to %+v, want %+v", rb.Samples, ra.Samples)
	}
}
