package main

// End-to-end tests that need more than the built binary (test/e2e has
// those): run() called in this process, whose BPF descriptors are then
// counted.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNoProbesLeftBehind runs coldtrace in this process and checks that
// every BPF program, map, link and perf event it opened is closed again.
// Only this process's descriptors are looked at, so other tests loading
// the same programs at the same time do not matter.
func TestNoProbesLeftBehind(t *testing.T) {
	requireTracing(t)
	before := bpfFDs(t)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-q", "--", "true"}, &out, &errb, time.Now()); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	after := bpfFDs(t)
	if len(after) > len(before) {
		t.Errorf("descriptors left open after the run: %v (before: %v)", after, before)
	}
}

// TestFIFOCommandLeavesNoBPFDescriptors runs coldtrace in this process
// on a FIFO as the command (it cannot be executed) and checks that every
// BPF object the failed run opened is closed again.
func TestFIFOCommandLeavesNoBPFDescriptors(t *testing.T) {
	requireTracing(t)
	fifo := filepath.Join(t.TempDir(), "fc")
	if err := unix.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	before := bpfFDs(t)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-q", "--", fifo}, &out, &errb, time.Now()); code != 127 {
		t.Errorf("in-process run: exit %d: %s", code, errb.String())
	}
	if after := bpfFDs(t); len(after) > len(before) {
		t.Errorf("BPF descriptors left open: %v (before: %v)", after, before)
	}
}
