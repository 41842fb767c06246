package main

// Helpers for the tests here that run this test binary as coldtrace
// (TestMain) or call its functions in this process. Tests of the built
// binary alone live in test/e2e; what both share is internal/e2eutil's.

import (
	"os"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
)

// requireTracing skips tests that need to load eBPF programs, saying why.
func requireTracing(t *testing.T) {
	t.Helper()
	testenv.RequireTracing(t)
}

// coldtrace runs the test binary as coldtrace with args and returns its
// exit code, stdout and stderr.
func coldtrace(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	return e2eutil.Run(t, os.Args[0], append([]string{asMainEnv + "=1"}, env...), args...)
}

// bpfFDs lists this process's file descriptors that hold BPF objects or
// perf events (classic tracepoints and uprobes attach through them).
func bpfFDs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own fd, closed by now
		}
		if strings.HasPrefix(target, "anon_inode:bpf") || target == "anon_inode:[perf_event]" {
			found = append(found, e.Name()+" -> "+target)
		}
	}
	return found
}
