package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// writeLabelled writes fixture name with labels to dir, for merge.
func writeLabelled(t *testing.T, dir, name string, labels map[string]string, command ...string) string {
	t.Helper()
	r := fixtures.Record(t, name)
	r.Labels = labels
	if len(command) > 0 {
		r.Command = command
	}
	path := filepath.Join(dir, labels["rank"]+".json")
	if err := record.WriteFile(path, r); err != nil {
		t.Fatal(err)
	}
	return path
}

// Records of different commands merge with a warning, in the text and on
// stderr with --json.
func TestMergeWarnsOnDifferentCommands(t *testing.T) {
	dir := t.TempDir()
	a := writeLabelled(t, dir, "truth-cold", map[string]string{"rank": "0"})
	b := writeLabelled(t, dir, "truth-warm", map[string]string{"rank": "1"}, "python", "other.py")
	code, stdout, stderr := coldtrace(t, nil, "merge", a, b)
	if code != 0 || !strings.Contains(stdout, "warning: records of different commands") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	code, stdout, stderr = coldtrace(t, nil, "merge", "--json", a, b)
	if code != 0 || !strings.Contains(stderr, "coldtrace: warning: records of different commands") || !json.Valid([]byte(stdout)) {
		t.Errorf("--json: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := coldtrace(t, nil, "merge"); code != exitUsage {
		t.Errorf("merge without records: exit %d", code)
	}
}

// Four ranks traced for real: rank 2 reads an evicted file, ranks 0, 1
// and 3 read it cached. merge names rank 2 and the file.
func TestMergeOfRealRanks(t *testing.T) {
	requireTracing(t)
	path := e2eutil.EvictableFile(t, 256<<20)
	dir := t.TempDir()
	var records []string
	trace := func(rank int) {
		rec := filepath.Join(dir, "rank"+strconv.Itoa(rank)+".json")
		code, _, stderr := coldtrace(t, nil, "-q", "-o", rec, "--label", "rank="+strconv.Itoa(rank),
			"--label", "host=node"+strconv.Itoa(rank), "--", "dd", "if="+path, "of=/dev/null", "bs=1M", "status=none")
		if code != 0 {
			t.Fatalf("rank %d: exit %d: %s", rank, code, stderr)
		}
		records = append(records, rec)
	}
	// A warm rank can take longer than the cold one when this shared VM
	// stalls it (seen: a warm rank at 416 ms against the cold one's 219 ms,
	// load average 10): one more
	// try is allowed, never more.
	var code int
	var stdout, stderr string
	for try := 1; ; try++ {
		records = nil
		e2eutil.Evict(t, path)
		trace(2) // cold: the file was just evicted
		for _, rank := range []int{0, 1, 3} {
			e2eutil.WarmUp(t, path)
			trace(rank)
		}
		code, stdout, stderr = coldtrace(t, nil, append([]string{"merge"}, records...)...)
		if code != 0 {
			t.Fatalf("merge: exit %d: %s", code, stderr)
		}
		t.Logf("merge (try %d):\n%s", try, stdout)
		if strings.Contains(stdout, "rank 2 was ") || try == 2 {
			break
		}
	}
	if !strings.Contains(stdout, "rank 2 was ") || !strings.Contains(stdout, "more disk reads — its node did not have "+path) {
		t.Errorf("merge does not name rank 2 and %s", path)
	}
	if !strings.Contains(stdout, "not in the page cache: "+path) || strings.Contains(stdout, "warning") {
		t.Errorf("causes or warnings wrong:\n%s", stdout)
	}
	code, stdout, _ = coldtrace(t, nil, append([]string{"merge", "--json"}, records...)...)
	var doc struct {
		Slowest int `json:"slowest"`
		Ranks   []struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 {
		t.Fatalf("merge --json: exit %d, %v", code, err)
	}
	if doc.Ranks[doc.Slowest].Labels["host"] != "node2" {
		t.Errorf("JSON slowest %+v", doc.Ranks[doc.Slowest])
	}
}

// Under sudo, merge reads records and writes -o as the invoking user: a
// record only root may read is refused, and the output is the user's.
func TestMergeAsSudoUser(t *testing.T) {
	testenv.RequireRoot(t)
	sudo := []string{"SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody"}
	dir, err := os.MkdirTemp("", "coldtrace-merge-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a := writeLabelled(t, dir, "truth-cold", map[string]string{"rank": "0"})
	b := writeLabelled(t, dir, "truth-warm", map[string]string{"rank": "1"})
	for _, p := range []string{a, b} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := writeLabelled(t, dir, "truth-warm", map[string]string{"rank": "2"})
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := coldtrace(t, sudo, "merge", a, b, secret); code != exitFailure || !strings.Contains(stderr, "permission denied") {
		t.Errorf("root-only record: exit %d, %q; want refused", code, stderr)
	}
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(outDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(outDir, "merge.txt")
	if code, _, stderr := coldtrace(t, sudo, "merge", "-o", out, a, b); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(out, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 65534 {
		t.Errorf("merge output owned by uid %d, want 65534", st.Uid)
	}
	if code, _, _ := coldtrace(t, sudo, "merge", "-o", filepath.Join(dir, "root-owned-dir.txt"), a, b); code != exitUsage {
		t.Errorf("-o in a directory the user may not write: exit %d, want %d before reading", code, exitUsage)
	}
}
