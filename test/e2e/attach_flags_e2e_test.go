package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/record"
)

// TestAttachWritesTextfileLabelsAndCheckpoints attaches to a running
// process with the flags run has: the label reaches the record and the
// node_exporter textfile, a checkpoint is written while the trace runs
// and removed once the outputs are, and --top bounds the text summary.
func TestAttachWritesTextfileLabelsAndCheckpoints(t *testing.T) {
	requireTracing(t)
	target := exec.Command("sleep", "120")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Process.Kill(); _ = target.Wait() })
	dir := t.TempDir()
	promDir := filepath.Join(dir, "prom")
	if err := os.Mkdir(promDir, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "attach.rec")
	a := startAttach(t, "--pid", strconv.Itoa(target.Process.Pid), "-o", rec, "--checkpoint", "200ms",
		"--prom-textfile", promDir, "--label", "job=attached", "--label", "instance=n1",
		"--no-jit", "--no-network", "--no-gpu", "--top", "3")
	partial := rec + ".partial"
	if !waitForPath(partial, 30*time.Second) {
		a.stop(t)
		t.Fatalf("no checkpoint %s while attached; stderr:\n%s", partial, a.stderr.String())
	}
	cp, err := record.ReadFile(partial)
	if err != nil || cp.Partial == nil {
		t.Errorf("the checkpoint is not a partial record: %v", err)
	}
	a.stop(t)
	r := readRecord(t, rec)
	if r.Labels["job"] != "attached" || r.Labels["instance"] != "n1" {
		t.Errorf("record labels %v: want job=attached instance=n1", r.Labels)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Errorf("the checkpoint outlived a trace whose outputs were written: %v", err)
	}
	prom, err := os.ReadFile(filepath.Join(promDir, "coldtrace_attached_n1.prom"))
	if err != nil {
		entries, _ := os.ReadDir(promDir)
		t.Fatalf("no textfile: %v (the directory holds %v)", err, entries)
	}
	if !strings.Contains(string(prom), `job="attached"`) || !strings.Contains(string(prom), "coldtrace_") {
		t.Errorf("the textfile lacks the run's metrics with its label:\n%s", prom)
	}
}

// waitForPath polls for path until limit.
func waitForPath(path string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
