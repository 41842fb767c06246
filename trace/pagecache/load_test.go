package pagecache

import (
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/sched"
)

// TestLoadWithSharedMaps loads the page-cache probes with the scheduler
// object's maps in place of their own, polls and closes both.
func TestLoadWithSharedMaps(t *testing.T) {
	testenv.RequireTracing(t)
	sc, err := sched.New(sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s, err := New(Options{Shared: sc.Shared().Replacements(), Waiting: sc.Waiting})
	if err != nil {
		t.Fatal(err)
	}
	var sample record.Sample
	if err := s.Poll(probe.MonotonicNS(), &sample); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}
