package advice

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// sourced runs sh on lines (as `. FILE`) in dir and prints variable v
// byte for byte.
func sourced(t *testing.T, dir string, lines []string, v string) string {
	t.Helper()
	script := filepath.Join(dir, "persist.sh")
	if err := os.WriteFile(script, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `. "$1" && printf '%s' "$`+v+`"`, "sh", script)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=/h", "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh . %q: %v: %s", lines, err, out)
	}
	return string(out)
}

func TestPersistExportsQuoteEveryValue(t *testing.T) {
	dir := t.TempDir()
	for _, root := range []string{"/c/x$(touch pwned)", "/c/it's", "/c/`touch pwned`", `/c/a\b`, "/c/$HOME", "/c/ spaced ", "/c/ünï"} {
		c := numbaCache(root, nil)
		got := Exports(PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}}))
		if len(got) != 1 || !strings.HasPrefix(got[0], "export NUMBA_CACHE_DIR='") {
			t.Fatalf("root %q: exports %q", root, got)
		}
		if v := sourced(t, dir, got, "NUMBA_CACHE_DIR"); v != root {
			t.Errorf("root %q: sh exported %q", root, v)
		}
	}
	// A cache that does not survive moves under the user's cache home;
	// its name is single-quoted after coldtrace's own prefix.
	c := numbaCache("/dev/shm/n", nil)
	c.Name, c.Survival = "n'$(touch pwned)", "lost at reboot"
	got := Exports(PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}}))
	if len(got) != 1 {
		t.Fatalf("exports %q", got)
	}
	if v := sourced(t, dir, got, "NUMBA_CACHE_DIR"); v != "/h/.cache/"+c.Name {
		t.Errorf("sh exported %q, want %q", v, "/h/.cache/"+c.Name)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Errorf("sourcing the export lines ran a command")
	}
}

func TestPersistSkipsUnsafeExports(t *testing.T) {
	for _, tc := range []struct {
		env, root, name, survival string
		why                       string
	}{
		{"A=1; touch pwned; B", "/c", "numba", "persistent", "not a shell variable name"},
		{"1X", "/c", "numba", "persistent", "not a shell variable name"},
		{"X-Y", "/c", "numba", "persistent", "not a shell variable name"},
		{"X\n", "/c", "numba", "persistent", "not a shell variable name"},
		{"X", "/c/a\nb", "numba", "persistent", "control character"},
		{"X", "/c/a\x1b[2Jb", "numba", "persistent", "control character"},
		{"X", "/c/a\xffb", "numba", "persistent", "invalid UTF-8"},
		{"X", "/c/a\u202eb", "numba", "persistent", "control character"},
		{"X", "/c/a\u0085b", "numba", "persistent", "control character"},
		{"X", "/dev/shm/n", "a\x07", "lost at reboot", "control character"},
		{"X", "/dev/shm/n", "../../etc", "lost at reboot", "not one directory name"},
		{"X", "/dev/shm/n", "..", "lost at reboot", "not one directory name"},
	} {
		c := numbaCache(tc.root, nil)
		c.MovedBy, c.Name, c.Survival = tc.env, tc.name, tc.survival
		list := PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
		if len(list) != 1 || list[0].Export != "" || !strings.Contains(list[0].Skipped, tc.why) || len(Exports(list)) != 0 {
			t.Errorf("%q=%q (name %q): %+v; want no export, skipped for %q", tc.env, tc.root, tc.name, list, tc.why)
		}
	}
	ok := numbaCache("/c/plain", nil)
	ok.MovedBy = "_Ok_9"
	if list := PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{ok}}}); list[0].Skipped != "" || list[0].Export != `export _Ok_9='/c/plain'` {
		t.Errorf("a plain export was skipped: %+v", list)
	}
}

func TestMovedRootActionNeedsAShellName(t *testing.T) {
	c := numbaCache("/new", nil)
	c.Via, c.MovedBy = "env", "A=1; touch pwned; B"
	c.OtherRoots = []record.OtherRoot{{Path: "/home/u/.cache/numba", Files: 3, SizeBytes: 10}}
	m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(m) != 1 || m[0].Reason != MovedRoot || m[0].Action != nil {
		t.Errorf("misses %+v: a moved root names a variable that is no shell name, so no export is advised", m)
	}
	c.MovedBy = "NUMBA_CACHE_DIR"
	m = Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(m) != 1 || m[0].Action == nil || !strings.Contains(m[0].Action.Action, "export NUMBA_CACHE_DIR=/home/u/.cache/numba") {
		t.Errorf("misses %+v: want the export advice for a shell name", m)
	}
}
