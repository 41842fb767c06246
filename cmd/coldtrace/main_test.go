package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/trace/launch"
)

// The test binary doubles as coldtrace: with COLDTRACE_TEST_AS_MAIN=1 it
// runs main's logic on its arguments, and as the gated shim it execs the
// traced command. End-to-end tests run it as a subprocess, so exit codes,
// signals and output files are those of the real program.
const asMainEnv = "COLDTRACE_TEST_AS_MAIN"

// holdEnv names a directory: coldtrace run as main then stops between the
// command's exit and writing its outputs, says so with DIR/held, and goes
// on once DIR/go exists.
const holdEnv = "COLDTRACE_TEST_HOLD"

// holdExitEnv names a directory: coldtrace run as main then stops after
// run has returned its exit code, just before the process exits, the
// same way (DIR/held, then DIR/go).
const holdExitEnv = "COLDTRACE_TEST_HOLD_EXIT"

func holdAt(dir string) {
	if err := os.WriteFile(filepath.Join(dir, "held"), nil, 0o644); err != nil {
		panic(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			return
		}
	}
}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == launch.ShimArg {
		launch.RunShim()
	}
	if os.Getenv(asMainEnv) == "1" {
		os.Unsetenv(asMainEnv)
		if dir := os.Getenv(holdEnv); dir != "" {
			os.Unsetenv(holdEnv)
			beforeOutputs = func() { holdAt(dir) }
		}
		exitDir := os.Getenv(holdExitEnv)
		os.Unsetenv(holdExitEnv)
		code := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, time.Now())
		if exitDir != "" {
			holdAt(exitDir)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}
