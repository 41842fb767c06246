package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/trace/launch"
)

// The test binary doubles as coldtrace: with COLDTRACE_TEST_AS_MAIN=1 it
// runs main's logic on its arguments, and as the gated shim it execs the
// traced command. End-to-end tests run it as a subprocess, so exit codes,
// signals and output files are those of the real program.
const asMainEnv = "COLDTRACE_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == launch.ShimArg {
		launch.RunShim()
	}
	if os.Getenv(asMainEnv) == "1" {
		os.Unsetenv(asMainEnv)
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, time.Now()))
	}
	os.Exit(m.Run())
}
