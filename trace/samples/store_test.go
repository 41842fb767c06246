package samples

import (
	"reflect"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

const ms = int64(1e6)

// poll is the sample of poll i (1-based) at 100 ms: thread 1 ran 10 ms,
// thread 2 (i even) waited 3 ms on I/O for file 0, file 1 had i pages.
func poll(i int) record.Sample {
	s := record.Sample{EndNS: int64(i) * 100 * ms,
		Threads: []record.ThreadDelta{{TID: 1, PID: 1, CPUNS: 10 * ms}},
		Files:   []record.FileDelta{{File: 1, PagesAccessed: uint64(i)}}}
	if i%2 == 0 {
		s.Threads = append(s.Threads, record.ThreadDelta{TID: 2, PID: 1, IOWaitNS: 3 * ms})
		s.Files = append(s.Files, record.FileDelta{File: 0, IOWaitNS: 3 * ms})
	}
	return s
}

type totals struct {
	cpu1, io2, fileIO int64
	pages             uint64
}

func sumOf(ss []record.Sample) totals {
	var t totals
	for _, s := range ss {
		for _, td := range s.Threads {
			if td.TID == 1 {
				t.cpu1 += td.CPUNS
			} else {
				t.io2 += td.IOWaitNS
			}
		}
		for _, fd := range s.Files {
			t.pages += fd.PagesAccessed
			t.fileIO += fd.IOWaitNS
		}
	}
	return t
}

func TestBoundedAndExact(t *testing.T) {
	const head, tail, polls = 10, 20, 5000
	st := New(Limits{HeadPolls: head, HeadEntries: 1 << 20, TailSamples: tail, TailEntries: 1 << 20})
	var want totals
	for i := 1; i <= polls; i++ {
		p := poll(i)
		want = addTotals(want, sumOf([]record.Sample{p}))
		st.Add(p)
		if n := len(st.Samples()); n > head+tail {
			t.Fatalf("after %d polls %d samples, want at most %d", i, n, head+tail)
		}
	}
	got := st.Samples()
	if g := sumOf(got); g != want {
		t.Errorf("totals %+v, want %+v", g, want)
	}
	for i := range head {
		if !reflect.DeepEqual(got[i], poll(i+1)) {
			t.Errorf("head sample %d = %+v, want the poll as taken", i, got[i])
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i].EndNS <= got[i-1].EndNS {
			t.Fatalf("sample %d ends at %d, not after %d", i, got[i].EndNS, got[i-1].EndNS)
		}
	}
	if last := got[len(got)-1].EndNS; last != polls*100*ms {
		t.Errorf("last sample ends at %d, want the last poll's %d", last, polls*100*ms)
	}
	c := st.Coarsening()
	if c == nil || c.FromNS != head*100*ms || c.Polls != polls || c.PollsPerSample < (polls-head)/tail {
		t.Errorf("coarsening %+v: want from %d, %d polls, at least %d a sample", c, head*100*ms, polls, (polls-head)/tail)
	}
	if l, ok := st.Last(); !ok || !reflect.DeepEqual(l, poll(polls)) {
		t.Errorf("Last = %+v, %v: want the last poll as taken", l, ok)
	}
}

func addTotals(a, b totals) totals {
	return totals{a.cpu1 + b.cpu1, a.io2 + b.io2, a.fileIO + b.fileIO, a.pages + b.pages}
}

func TestShortRunUntouched(t *testing.T) {
	st := New(DefaultLimits())
	var want []record.Sample
	for i := 1; i <= 500; i++ {
		st.Add(poll(i))
		want = append(want, poll(i))
	}
	if !reflect.DeepEqual(st.Samples(), want) || st.Coarsening() != nil {
		t.Errorf("a run within the head changed: coarsening %+v", st.Coarsening())
	}
}

// A sample handed out (a checkpoint being written) is never written
// again, whatever the store does next.
func TestHandedOutSamplesStay(t *testing.T) {
	st := New(Limits{HeadPolls: 2, HeadEntries: 100, TailSamples: 4, TailEntries: 100})
	for i := 1; i <= 7; i++ {
		st.Add(poll(i))
	}
	taken := st.Samples()
	frozen := make([]record.Sample, len(taken))
	for i, s := range taken {
		frozen[i] = record.Sample{EndNS: s.EndNS, Threads: append([]record.ThreadDelta(nil), s.Threads...),
			Files: append([]record.FileDelta(nil), s.Files...)}
	}
	for i := 8; i <= 100; i++ {
		st.Add(poll(i))
	}
	if !reflect.DeepEqual(taken, frozen) {
		t.Errorf("samples handed out changed:\n%+v\nwant\n%+v", taken, frozen)
	}
}

// The samples around a mark keep the poll's resolution through
// coarsening, while marks are few.
func TestMarksKeepResolution(t *testing.T) {
	st := New(Limits{TailSamples: 8, TailEntries: 1000})
	mark := int64(205) * 100 * ms / 10 // 2.05 s: inside poll 21
	for i := 1; i <= 40; i++ {
		if i == 21 {
			st.Mark(mark)
		}
		st.Add(poll(i))
	}
	var prev int64
	found := false
	for _, s := range st.Samples() {
		if mark > prev && mark <= s.EndNS {
			found = true
			if s.EndNS-prev != 100*ms {
				t.Errorf("the sample holding the mark spans %d ms, want one poll (100 ms)", (s.EndNS-prev)/ms)
			}
		}
		prev = s.EndNS
	}
	if !found {
		t.Fatal("no sample holds the mark")
	}
}

// Marks at every poll cannot keep the store from shrinking.
func TestMarksEveryPollStillBounded(t *testing.T) {
	st := New(Limits{TailSamples: 16, TailEntries: 1000})
	for i := 1; i <= 2000; i++ {
		st.Mark(int64(i)*100*ms - ms)
		st.Add(poll(i))
	}
	if n := len(st.Samples()); n > 17 {
		t.Errorf("%d samples with a mark in every poll, want at most 17", n)
	}
}

// Merge sums every numeric field of a delta: a field added to
// ThreadDelta or FileDelta and not to Merge fails here.
func TestMergeSumsEveryField(t *testing.T) {
	var td record.ThreadDelta
	var fd record.FileDelta
	fill(reflect.ValueOf(&td).Elem(), 1)
	fill(reflect.ValueOf(&fd).Elem(), 1)
	td.TID, td.PID, fd.File = 7, 3, 5
	fd.Stacks = []record.SampleStack{{N: 1, NS: 1}}
	m := Merge(record.Sample{EndNS: 1, Threads: []record.ThreadDelta{td}, Files: []record.FileDelta{fd}},
		record.Sample{EndNS: 2, Threads: []record.ThreadDelta{td}, Files: []record.FileDelta{fd}})
	want := func(v reflect.Value, skip ...string) {
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			if contains(skip, name) {
				continue
			}
			if got := v.Field(i); !got.Equal(reflect.ValueOf(int64(2)).Convert(got.Type())) {
				t.Errorf("merged %s.%s = %v, want 2", v.Type().Name(), name, got)
			}
		}
	}
	if len(m.Threads) != 1 || len(m.Files) != 1 || m.EndNS != 2 {
		t.Fatalf("merged %+v: want one thread, one file, ending at 2", m)
	}
	want(reflect.ValueOf(m.Threads[0]), "TID", "PID")
	want(reflect.ValueOf(m.Files[0]), "File", "Stacks")
	if want := []record.SampleStack{{N: 1, NS: 2}}; !reflect.DeepEqual(m.Files[0].Stacks, want) {
		t.Errorf("merged stacks %+v, want %+v", m.Files[0].Stacks, want)
	}
	if m.Threads[0].TID != 7 || m.Threads[0].PID != 3 || m.Files[0].File != 5 {
		t.Errorf("merged keys %+v %+v", m.Threads[0], m.Files[0])
	}
}

func fill(v reflect.Value, n int64) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int32, reflect.Int64:
			f.SetInt(n)
		case reflect.Uint64, reflect.Uint32:
			f.SetUint(uint64(n))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Polls touching many files: the entries bound the memory, not the
// count of samples. Files that recur (each read every 8 s here) are
// merged into coarser samples until the entries fit; the head ends at
// its entry limit.
func TestEntriesBound(t *testing.T) {
	lim := Limits{HeadPolls: 600, HeadEntries: 1000, TailSamples: 1200, TailEntries: 8000}
	st := New(lim)
	var wantPages uint64
	for i := 1; i <= 20000; i++ {
		p := record.Sample{EndNS: int64(i) * 100 * ms}
		for f := range 50 {
			p.Files = append(p.Files, record.FileDelta{File: (i*50 + f) % 4000, PagesAccessed: 1})
			wantPages++
		}
		st.Add(p)
		if i%7 != 0 {
			continue
		}
		n := 0
		v := st.View()
		for _, p := range v.kept {
			n += p.entries()
		}
		if v.pend != nil {
			n += len(v.pend.Threads) + len(v.pend.Files)
		}
		// At most twice minTail coarse samples of every file, and the polls
		// being summed.
		if n > lim.HeadEntries+max(lim.TailEntries, 2*minTail*4000)+4000 {
			t.Fatalf("after %d polls %d entries held", i, n)
		}
	}
	got := st.Samples()
	var pages uint64
	for _, s := range got {
		for _, fd := range s.Files {
			pages += fd.PagesAccessed
		}
	}
	if pages != wantPages {
		t.Errorf("pages %d, want %d", pages, wantPages)
	}
	if c := st.Coarsening(); c == nil || c.FromNS != 20*100*ms {
		t.Errorf("coarsening %+v: want the head to end at its 1000 entries (poll 20)", c)
	}
	if len(got) < 20+minTail/2 {
		t.Errorf("%d samples: the tail went under %d", len(got), minTail)
	}
}

// Files that never recur (a dataset read once): the tail stops merging
// at minTail samples and holds what the files need, not more.
func TestDisjointFilesStopMerging(t *testing.T) {
	st := New(Limits{TailSamples: 1200, TailEntries: 1000})
	const polls, per = 5000, 20
	for i := range polls {
		p := record.Sample{EndNS: int64(i+1) * 100 * ms}
		for f := range per {
			p.Files = append(p.Files, record.FileDelta{File: i*per + f, PagesMissed: 1})
		}
		st.Add(p)
	}
	got := st.Samples()
	n := 0
	for _, s := range got {
		n += len(s.Files)
	}
	if n != polls*per {
		t.Errorf("%d file entries, want one per file (%d)", n, polls*per)
	}
	if len(got) < minTail {
		t.Errorf("%d samples, want at least %d", len(got), minTail)
	}
}

// Closes is true at every poll of the head, then at every stride-th poll
// and at a poll holding a mark: the polls where a lazy sensor's
// cumulative counters must be read for the samples to come out right.
func TestCloses(t *testing.T) {
	st := New(Limits{HeadPolls: 4, HeadEntries: 1000, TailSamples: 4, TailEntries: 1000})
	var closing []int
	for i := 1; i <= 40; i++ {
		if i == 31 {
			st.Mark(int64(i)*100*ms - ms)
		}
		if st.Closes(int64(i) * 100 * ms) {
			closing = append(closing, i)
		}
		closes := st.Closes(int64(i) * 100 * ms)
		st.Add(poll(i))
		// Closing means the poll's sample was stored, alone or as the
		// end of a coarse one; otherwise it waits in the sum.
		if stored := st.pendN == 0; stored != closes {
			t.Errorf("poll %d: Closes said %v, yet stored %v", i, closes, stored)
		}
	}
	for i := 1; i <= 5; i++ {
		if !containsInt(closing, i) {
			t.Errorf("head poll %d not closing: %v", i, closing)
		}
	}
	if !containsInt(closing, 31) {
		t.Errorf("the marked poll 31 does not close: %v", closing)
	}
	if len(closing) >= 40 {
		t.Errorf("every poll closes (%v): the coarse part should skip some", closing)
	}
}

func containsInt(list []int, x int) bool {
	for _, v := range list {
		if v == x {
			return true
		}
	}
	return false
}

// TestMergeKeepsTheStacksWithTheMostTime: two intervals' stacks of one
// file sum per stack, most time first, bounded, and the inputs stay as
// they were.
func TestMergeKeepsTheStacksWithTheMostTime(t *testing.T) {
	a := []record.SampleStack{{N: 1, NS: 10}, {N: 2, NS: 5}, {N: 3, NS: 4}}
	b := []record.SampleStack{{N: 2, NS: 20}, {N: 4, NS: 3}, {N: 5, NS: 2}}
	got := MergeStacks(a, b)
	want := []record.SampleStack{{N: 2, NS: 25}, {N: 1, NS: 10}, {N: 3, NS: 4}, {N: 4, NS: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged %+v, want %+v", got, want)
	}
	if a[1].NS != 5 || b[0].NS != 20 {
		t.Errorf("the inputs were written: %+v %+v", a, b)
	}
}

// TestPackKeepsFileStacks: a file delta's stacks come back from the
// packed form.
func TestPackKeepsFileStacks(t *testing.T) {
	smp := record.Sample{EndNS: 9, Files: []record.FileDelta{{File: 1, IOWaitNS: 7, Stacks: []record.SampleStack{{N: 3, NS: 5}, {N: 1, NS: 2}}},
		{File: 2, PagesAccessed: 1}}}
	if got := unpacked(pack(smp)); !reflect.DeepEqual(got, smp) {
		t.Errorf("unpacked %+v, want %+v", got, smp)
	}
}
