package main

// End-to-end tests that need more than the built binary (test/e2e has
// those): run() called in this process, whose BPF descriptors are then
// counted, and this test binary run as coldtrace and held by TestMain's
// hooks between the command's exit and the outputs, or at the exit, while
// signals arrive.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
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

// A SIGTERM after the command exited, while coldtrace analyses, costs
// nothing: both outputs are written, coldtrace exits with the command's 0,
// and no temporary file is left beside them.
func TestSignalAfterExitKeepsOutputsAndExitCode(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	out, rec := filepath.Join(dir, "s.json"), filepath.Join(dir, "r.ctrace")
	hold := t.TempDir()
	cmd := exec.Command(os.Args[0], "-q", "--json", out, "-o", rec, "--", "true")
	cmd.Env = append(os.Environ(), asMainEnv+"=1", holdEnv+"="+hold)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(hold, "held"), cmd, &errb)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(hold, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("coldtrace ended with %v, want the command's exit 0; stderr: %s", err, errb.String())
	}
	if s := readSummary(t, out); s.ExitCode != 0 {
		t.Errorf("summary exit_code %d", s.ExitCode)
	}
	if _, err := record.ReadFile(rec); err != nil {
		t.Errorf("record: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("files in the output directory: %v, want the two outputs only", ents)
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

// TestSignalAfterExitKeepsOutputs: a signal that arrives after the
// command exited, while coldtrace is about to write its outputs, neither
// stops the writing nor changes the exit code.
func TestSignalAfterExitKeepsOutputs(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	out, rec := filepath.Join(dir, "s.json"), filepath.Join(dir, "r.ctrace")
	cmd := exec.Command(os.Args[0], "-q", "--json", out, "-o", rec, "--", "sh", "-c", "exit 3")
	cmd.Env = append(os.Environ(), asMainEnv+"=1", holdEnv+"="+dir)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "held"), cmd, &errb)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("coldtrace ended with %v, want the command's exit 3; stderr: %s", err, errb.String())
	}
	if s := readSummary(t, out); s.ExitCode != 3 {
		t.Errorf("summary exit_code %d", s.ExitCode)
	}
	if _, err := record.ReadFile(rec); err != nil {
		t.Errorf("record: %v", err)
	}
}

// TestLateSignalsKeepTheCommandsExitCode: signals that arrive after
// coldtrace has written its outputs and returned the command's exit
// code, as the process exits, are caught (coldtrace is held there, the
// last moment a signal could arrive): 20 of 20 runs exit with the
// command's 3, none "killed by signal", whichever of SIGINT, SIGHUP and
// SIGTERM arrives, three times over.
func TestLateSignalsKeepTheCommandsExitCode(t *testing.T) {
	requireTracing(t)
	const runs = 20
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM}
	kept := 0
	for i := range runs {
		dir, hold := t.TempDir(), t.TempDir()
		rec := filepath.Join(dir, "r.rec")
		cmd := exec.Command(os.Args[0], "-q", "-o", rec, "--", "sh", "-c", "exit 3")
		cmd.Env = append(os.Environ(), asMainEnv+"=1", holdExitEnv+"="+hold)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, filepath.Join(hold, "held"), cmd, &errb)
		sig := sigs[i%len(sigs)]
		for range 3 {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(hold, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			kept++
		} else {
			t.Errorf("run %d (%v): coldtrace ended with %v, want the command's exit 3; stderr: %s", i, sig, err, errb.String())
		}
		if _, err := record.ReadFile(rec); err != nil {
			t.Errorf("run %d: record: %v", i, err)
		}
	}
	if kept != runs {
		t.Errorf("%d of %d runs kept the command's exit code", kept, runs)
	}
}
