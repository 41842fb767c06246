package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/schematest"
)

// TestSmoke runs the harness end to end at smoke size (one pair per
// workload, small files, no budgets), so that it cannot rot unnoticed;
// with the floor's runs beside the empty programs.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the smoke bench builds and runs coldtrace")
	}
	if why := cannotRun(); why != "" {
		t.Skipf("smoke bench skipped: %s", why)
	}
	bin := filepath.Join(t.TempDir(), "coldtrace")
	// go test puts its own GOROOT/bin first in the test's PATH.
	build := exec.Command("go", "build", "-o", bin, "../coldtrace")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build coldtrace: %v\n%s", err, out)
	}
	var out strings.Builder
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	code := run([]string{"-coldtrace", bin, "-smoke", "-floor", "-json", jsonPath}, &out, &out)
	t.Log(out.String())
	if code != 0 {
		t.Fatalf("bench -smoke exited %d", code)
	}
	if b, err := os.ReadFile(jsonPath); err != nil {
		t.Errorf("no JSON results: %v", err)
	} else {
		schematest.Validate(t, docOverhead.Name, b)
	}
	for _, name := range append(workloadNames, "What untraced processes pay", "floor", "getppid", "gai", "over floor") {
		if !strings.Contains(out.String(), name) {
			t.Errorf("the table lacks %s", name)
		}
	}
}
