package trace

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/samples"
)

// deltaSums are a timeline's sums per thread and per file.
type deltaSums struct {
	threads map[int32]record.ThreadDelta
	files   map[int]record.FileDelta
}

// sumDeltas folds a timeline into one sample with samples.Merge (whose
// sums TestMergeSumsEveryField checks field by field).
func sumDeltas(ss []record.Sample) deltaSums {
	var all record.Sample
	for _, s := range ss {
		all = samples.Merge(all, s)
	}
	d := deltaSums{threads: map[int32]record.ThreadDelta{}, files: map[int]record.FileDelta{}}
	for _, td := range all.Threads {
		d.threads[td.TID] = td
	}
	for _, fd := range all.Files {
		// Stacks keep the few with the most time, not exact sums.
		fd.Stacks = nil
		d.files[fd.File] = fd
	}
	return d
}

// TestTimelineCoarsened: a run polled every 10 ms with a store of 20
// polls and 8 coarse samples (a long run's shape in two seconds, with
// checkpoints taken while it coarsens) records at most that many samples,
// says so in Coarsened, and its samples sum to exactly what the polls
// handed to OnSample did, per thread and per file, and to each file's
// totals although the page cache's table was read only at the polls
// that closed a coarse sample.
func TestTimelineCoarsened(t *testing.T) {
	requireTracing(t)
	data := filepath.Join(t.TempDir(), "data.bin")
	if err := os.WriteFile(data, bytes.Repeat([]byte("z"), 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var polls []record.Sample
	var checkpoints int
	lim := samples.Limits{HeadPolls: 20, HeadEntries: 1 << 20, TailSamples: 8, TailEntries: 1 << 20}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Reads (evicted between rounds, so some miss), CPU and sleeps.
	script := "i=0; while [ $i -lt 20 ]; do cat " + data + " >/dev/null; dd if=" + data +
		" of=/dev/null iflag=nocache count=0 2>/dev/null; j=0; while [ $j -lt 2000 ]; do j=$((j+1)); done; sleep 0.05; i=$((i+1)); done"
	rec, err := Run(ctx, Options{Command: []string{"sh", "-c", script}, NoGPU: true, Actor: self,
		Interval: 10 * time.Millisecond, Timeline: lim,
		OnSample:        func(s record.Sample) { mu.Lock(); polls = append(polls, s); mu.Unlock() },
		Checkpoint:      func(*record.Record) error { mu.Lock(); checkpoints++; mu.Unlock(); return nil },
		CheckpointEvery: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The run lasts about 2 s, but how many 10 ms polls fit in it is the
	// machine's business (77 on a loaded VM): what the test needs is
	// enough polls past the head to coarsen the tail at least twice.
	if min := lim.HeadPolls + 2*lim.TailSamples + 4; len(polls) < min {
		t.Fatalf("%d polls in the run: want at least %d to coarsen", len(polls), min)
	}
	if n := len(rec.Samples); n > lim.HeadPolls+lim.TailSamples {
		t.Errorf("%d samples for %d polls, want at most %d", n, len(polls), lim.HeadPolls+lim.TailSamples)
	}
	c := rec.Coarsened
	if c == nil || c.Polls != len(polls) || c.PollsPerSample < 2 || c.FromNS != polls[lim.HeadPolls-1].EndNS {
		t.Errorf("coarsened %+v: want %d polls, from %d", c, len(polls), polls[lim.HeadPolls-1].EndNS)
	}
	for i := range lim.HeadPolls {
		if rec.Samples[i].EndNS != polls[i].EndNS {
			t.Fatalf("head sample %d ends at %d, its poll at %d", i, rec.Samples[i].EndNS, polls[i].EndNS)
		}
	}
	if last := rec.Samples[len(rec.Samples)-1].EndNS; last != polls[len(polls)-1].EndNS {
		t.Errorf("last sample ends at %d, the last poll at %d", last, polls[len(polls)-1].EndNS)
	}
	want, got := sumDeltas(polls), sumDeltas(rec.Samples)
	if len(want.threads) == 0 || len(want.files) == 0 {
		t.Fatalf("the polls saw %d threads and %d files", len(want.threads), len(want.files))
	}
	for tid, w := range want.threads {
		if got.threads[tid] != w {
			t.Errorf("thread %d: samples sum to %+v, polls to %+v", tid, got.threads[tid], w)
		}
	}
	for id, w := range want.files {
		if !reflect.DeepEqual(got.files[id], w) {
			t.Errorf("file %d: samples sum to %+v, polls to %+v", id, got.files[id], w)
		}
	}
	if len(got.threads) != len(want.threads) || len(got.files) != len(want.files) {
		t.Errorf("samples hold %d threads and %d files, polls %d and %d", len(got.threads), len(got.files), len(want.threads), len(want.files))
	}
	// The file table was read lazily in the coarse part: the samples
	// still sum to each file's totals.
	for _, f := range rec.Files {
		d := got.files[f.ID]
		if d.PagesAccessed != f.PagesAccessed || d.PagesMissed != f.PagesMissed {
			t.Errorf("file %d (%s): samples sum to %d accessed, %d missed; its totals %d, %d",
				f.ID, f.Path, d.PagesAccessed, d.PagesMissed, f.PagesAccessed, f.PagesMissed)
		}
	}
	if checkpoints < 3 {
		t.Errorf("%d checkpoints taken while coarsening, want at least 3", checkpoints)
	}
	for _, v := range invariants.Check(rec) {
		t.Errorf("invariant: %v", v)
	}
}
