package machine

import (
	"os"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// A checkpoint's machine facts are readings of now, and taking one
// changes nothing the end of the run writes: the cgroups are listed once,
// and a reading that failed for the checkpoint is not the record's.
func TestSnapshotLeavesTheEndAlone(t *testing.T) {
	pid := os.Getpid()
	s, err := New(Options{LivePIDs: func() ([]int, error) { return []int{pid}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	s.Begin(0)
	if err := s.Poll(0, nil); err != nil {
		t.Fatal(err)
	}
	var ckpt record.Record
	if err := s.Snapshot(&ckpt); err != nil {
		t.Fatal(err)
	}
	m := ckpt.Machine
	if m == nil || m.MemStart.TotalBytes == 0 || m.MemEnd.TotalBytes == 0 {
		t.Fatalf("checkpoint machine %+v: want memory at the release and now", m)
	}
	var end record.Record
	if err := s.Finish(&end); err != nil {
		t.Fatal(err)
	}
	if len(end.Machine.Cgroups) != len(m.Cgroups) {
		t.Errorf("record lists %d cgroups, the checkpoint %d: a checkpoint added to the end's", len(end.Machine.Cgroups), len(m.Cgroups))
	}
}

func TestSnapshotErrorsStayInTheCheckpoint(t *testing.T) {
	s, err := New(Options{Proc: t.TempDir()}) // no meminfo, no stat
	if err != nil {
		t.Fatal(err)
	}
	s.Begin(0)
	var ckpt record.Record
	if err := s.Snapshot(&ckpt); err == nil || !strings.Contains(err.Error(), "read meminfo") {
		t.Fatalf("checkpoint error %v, want the failed meminfo reading", err)
	}
	var end record.Record
	err = s.Finish(&end)
	// Begin's reading and Finish's: not the checkpoint's.
	if n := strings.Count(err.Error(), "read meminfo"); n != 2 {
		t.Errorf("record error %q names %d meminfo failures, want 2", err, n)
	}
}
