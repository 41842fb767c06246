package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/advice"
)

// reportMisses runs `coldtrace report --json --baseline BASE REC` and
// returns its cache misses.
func reportMisses(t *testing.T, base, rec string) []advice.CacheMiss {
	t.Helper()
	code, out, stderr := coldtrace(t, nil, "report", "--json", "--baseline", base, rec)
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	var s struct {
		CacheMisses []advice.CacheMiss `json:"cache_misses"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	return s.CacheMisses
}

// A Numba cache filled under NUMBA_CACHE_DIR=A and looked up under
// NUMBA_CACHE_DIR=B: with A's record as the baseline, the miss is a
// different root that NUMBA_CACHE_DIR made, with A's entries named;
// run again under A, every lookup hits and there is nothing to say.
func TestUnusedCacheAnotherRootNamesTheVariableAndTheEntries(t *testing.T) {
	requireTracing(t)
	base := t.TempDir()
	prog := adviceNumbaProgram(t, filepath.Join(base, "proj"))
	dirA, dirB := filepath.Join(base, "A"), filepath.Join(base, "B")

	ra, sa := adviceRun(t, []string{"NUMBA_CACHE_DIR=" + dirA}, "/usr/bin/python3", prog)
	if ca := adviceNumbaCache(t, ra); ca.EntriesWritten == 0 {
		t.Fatalf("run under A wrote nothing: %+v", ca)
	}
	_, sb := adviceRun(t, []string{"NUMBA_CACHE_DIR=" + dirB}, "/usr/bin/python3", prog)
	m := reportMisses(t, sa.recPath, sb.recPath)
	if len(m) != 1 || m[0].Reason != advice.MovedRoot || m[0].Root != dirB || m[0].Via != "NUMBA_CACHE_DIR" ||
		len(m[0].EntriesAt) == 0 || m[0].EntriesAt[0].Path != dirA || m[0].EntriesAt[0].From != "baseline record" || m[0].EntriesAt[0].Files == 0 {
		t.Fatalf("misses under B with A's baseline: %+v", m)
	}
	for _, want := range []string{"a different root", "(NUMBA_CACHE_DIR made it)", "while " + dirA + " holds"} {
		if !strings.Contains(m[0].Sentence, want) {
			t.Errorf("sentence lacks %q: %s", want, m[0].Sentence)
		}
	}

	_, sa2 := adviceRun(t, []string{"NUMBA_CACHE_DIR=" + dirA}, "/usr/bin/python3", prog)
	if m := reportMisses(t, sa.recPath, sa2.recPath); len(m) != 0 {
		t.Errorf("rerun under A (hits): misses %+v", m)
	}
}

// The same root, the source touched: Numba finds its index, no entry
// matches, and the finding says what Numba's key includes without naming
// which part changed.
func TestUnusedCacheSameRootSaysWhatTheKeyIncludes(t *testing.T) {
	requireTracing(t)
	base := t.TempDir()
	prog := adviceNumbaProgram(t, filepath.Join(base, "proj"))
	env := []string{"NUMBA_CACHE_DIR=" + filepath.Join(base, "cache")}
	adviceRun(t, env, "/usr/bin/python3", prog)
	st, err := os.Stat(prog)
	if err != nil {
		t.Fatal(err)
	}
	later := st.ModTime().Add(10e9)
	if err := os.Chtimes(prog, later, later); err != nil {
		t.Fatal(err)
	}
	_, s := adviceRun(t, env, "/usr/bin/python3", prog)
	if len(s.CacheMisses) != 1 || s.CacheMisses[0].Reason != advice.KeyChanged || len(s.CacheMisses[0].EntriesAt) != 0 ||
		!strings.Contains(s.CacheMisses[0].KeyIncludes, "modification time") {
		t.Fatalf("misses after touch: %+v", s.CacheMisses)
	}
	for _, want := range []string{"the same root, every lookup missed", "Numba's key includes the source file's path, modification time"} {
		if !strings.Contains(s.CacheMisses[0].Sentence, want) {
			t.Errorf("sentence lacks %q: %s", want, s.CacheMisses[0].Sentence)
		}
	}
}
