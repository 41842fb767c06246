package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoJITTurnsTheJITSensorOff: a python run records its kernel caches;
// with --no-jit, or the deprecated COLDTRACE_NO_JIT=1 (which says so on
// stderr), it records none.
func TestNoJITTurnsTheJITSensorOff(t *testing.T) {
	requireTracing(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		env     []string
		flags   []string
		wantJIT bool
		note    bool
	}{
		{"default", nil, nil, true, false},
		{"flag", nil, []string{"--no-jit", "--no-network"}, false, false},
		{"env", []string{"COLDTRACE_NO_JIT=1"}, nil, false, true},
	} {
		rec := filepath.Join(dir, c.name+".rec")
		args := append(append([]string{"-q", "-o", rec}, c.flags...), "--", "python3", "-c", "pass")
		code, _, stderr := coldtrace(t, c.env, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		r := readRecord(t, rec)
		if (r.JIT != nil) != c.wantJIT {
			t.Errorf("%s: JIT section present %v, want %v", c.name, r.JIT != nil, c.wantJIT)
		}
		if strings.Contains(stderr, "deprecated") != c.note {
			t.Errorf("%s: stderr %q: want a deprecation note %v", c.name, stderr, c.note)
		}
	}
}
