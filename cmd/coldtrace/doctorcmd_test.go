package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/trace/doctor"
)

func TestDoctorUsage(t *testing.T) {
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"doctor", "extra"}, &out, &errb, time.Now()); code != exitUsage {
		t.Errorf("doctor with an argument: exit %d, %s", code, errb.String())
	}
}

// TestDoctorCommand: exit 0 here; a hidden tracepoint makes it exit 1
// and name the tracepoint on stderr.
func TestDoctorCommand(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	var out, errb strings.Builder
	if code := runDoctor(context.Background(), []string{"--dir", dir}, &out, &errb, doctor.Options{}); code != 0 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "0 failed") {
		t.Errorf("doctor output:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	code := runDoctor(context.Background(), []string{"--dir", dir}, &out, &errb, doctor.Options{Hide: []string{"sched_switch"}})
	if code != exitDoctorFailed || !strings.Contains(errb.String(), "coldtrace: doctor: FAILED tp_btf sched_switch (scheduler)") {
		t.Errorf("doctor with sched_switch hidden: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
}
