package sched

import (
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/sensor"
)

// TestLoadPollClose loads and attaches the scheduler probes, polls them
// once and closes them: every map and program is released.
func TestLoadPollClose(t *testing.T) {
	testenv.RequireTracing(t)
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	var sample record.Sample
	if err := s.Poll(sensor.MonotonicNS(), &sample); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}
