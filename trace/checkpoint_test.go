package trace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
)

// TestCheckpoints: a run of about a second with checkpoints every 100 ms
// hands out partial records that grow, each with the sensors' parts, and
// a final record that is not partial; a failing writer leaves one warning.
func TestCheckpoints(t *testing.T) {
	requireTracing(t)
	data := filepath.Join(t.TempDir(), "data.bin")
	if err := os.WriteFile(data, bytes.Repeat([]byte("y"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []*record.Record
	write := func(rec *record.Record) error {
		// As the file has it: the samples are streamed from the store.
		var buf bytes.Buffer
		if err := record.Encode(&buf, rec); err != nil {
			return err
		}
		dec, err := record.Decode(&buf)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, dec)
		if len(got) == 2 {
			return errors.New("disk full")
		}
		return nil
	}
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := Run(ctx, Options{Command: []string{"sh", "-c", "cat " + data + " >/dev/null; sleep 1"}, NoGPU: true,
		Actor: self, Checkpoint: write, CheckpointEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Partial != nil {
		t.Errorf("the final record is marked partial: %+v", rec.Partial)
	}
	var warned int
	for _, w := range rec.Warnings {
		if strings.Contains(w, "checkpoint:") && strings.Contains(w, "disk full") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("warnings %q: want one about the failed checkpoint", rec.Warnings)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 5 {
		t.Fatalf("%d checkpoints in a 1 s run every 100 ms", len(got))
	}
	var prev int64 = -1
	for i, c := range got {
		if c.Partial == nil || c.WallNS != c.Partial.AtNS || c.Partial.AtNS < prev {
			t.Errorf("checkpoint %d: partial %+v, wall %d, previous at %d", i, c.Partial, c.WallNS, prev)
		}
		prev = c.Partial.AtNS
		if n := len(c.Samples); n > 0 && c.Samples[n-1].EndNS != c.WallNS {
			t.Errorf("checkpoint %d ends at %d, its last sample at %d", i, c.WallNS, c.Samples[n-1].EndNS)
		}
	}
	last := got[len(got)-1]
	var read bool
	for _, f := range last.Files {
		read = read || f.Path == data && f.PagesAccessed == 512
	}
	if !read || len(last.Processes) < 2 || len(last.Threads) < 2 || last.JIT == nil && last.Self.EventsSeen == 0 {
		t.Errorf("last checkpoint: data read %v, %d processes, %d threads, %d events", read, len(last.Processes), len(last.Threads), last.Self.EventsSeen)
	}
	// Every sensor says what a checkpoint holds: the machine's facts so
	// far are in it, not left out by omission.
	if m := last.Machine; m == nil || m.MemStart.TotalBytes == 0 || m.MemEnd.TotalBytes == 0 {
		t.Errorf("last checkpoint: machine facts %+v, want memory at the release and at the checkpoint", m)
	}
	t.Logf("%d checkpoints; last at %v with %d samples", len(got), time.Duration(last.Partial.AtNS), len(last.Samples))
}
