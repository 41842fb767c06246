// Package e2e runs the coldtrace binary against real programs: cc,
// python3, numba, torch, prometheus, chromium, FUSE and loop mounts. The
// binary is built once, in TestMain, the way `make build` builds it; each
// test runs it as a subprocess, so exit codes, signals and output files
// are those of the real program. Tests that need root or a kernel that
// traces skip without them, and every traced test skips under -short.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/bench"
	"github.com/coldtrace/coldtrace/report/diff"
	reportmerge "github.com/coldtrace/coldtrace/report/merge"
	"github.com/coldtrace/coldtrace/report/segments"
	"github.com/coldtrace/coldtrace/report/status"
	"github.com/coldtrace/coldtrace/report/summary"
)

// ctBin is the coldtrace binary TestMain built for this run of the tests.
var ctBin string

// coldtrace's exit codes (cmd/coldtrace): a usage error and its own
// failure follow env(1) and timeout(1); a residency command that could
// not act on every file exits with exitPartial.
const (
	exitUsage   = 125
	exitFailure = 125
	exitPartial = 1
)

// The JSON documents the tests validate against docs/schemas, by name.
var (
	docStatus       = schematest.Document{Name: "status", ID: status.Schema}
	docBench        = schematest.Document{Name: "bench", ID: bench.Schema}
	docEvict        = schematest.Document{Name: "evict", ID: status.EvictSchema}
	docPrefetch     = schematest.Document{Name: "prefetch", ID: status.PrefetchSchema}
	docPrefetchPlan = schematest.Document{Name: "prefetch-plan", ID: status.PrefetchPlanSchema}
	docSummary      = schematest.Document{Name: "summary", ID: summary.Schema}
	docRecord       = schematest.Document{Name: "record", ID: record.Schema}
	docDiff         = schematest.Document{Name: "diff", ID: diff.Schema}
	docMerge        = schematest.Document{Name: "merge", ID: reportmerge.Schema}
	docTimeline     = schematest.Document{Name: "timeline"}
	docSegments     = schematest.Document{Name: "segments", ID: segments.Schema}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coldtrace-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	// World-readable, so that tests running coldtrace as another user
	// (nobody, a sudo user) can execute the same binary.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	ctBin = filepath.Join(dir, "coldtrace")
	code := 1
	if err := buildColdtrace(ctBin); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the tests need the coldtrace binary:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildColdtrace builds ./cmd/coldtrace into path as `make build` does:
// the Makefile's CGO_CFLAGS unless the environment sets its own.
func buildColdtrace(path string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("no go command to build it with: %w", err)
	}
	cmd := exec.Command(goTool, "build", "-o", path, "github.com/coldtrace/coldtrace/cmd/coldtrace")
	cmd.Env = os.Environ()
	if _, set := os.LookupEnv("CGO_CFLAGS"); !set {
		cmd.Env = append(cmd.Env, "CGO_CFLAGS=-Wno-deprecated-declarations")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/coldtrace: %w\n%s", err, out)
	}
	return nil
}
