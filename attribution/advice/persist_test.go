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
		root, name, survival string
		why                  string
	}{
		{"/c/a\nb", "numba", "persistent", "control character"},
		{"/c/a\x1b[2Jb", "numba", "persistent", "control character"},
		{"/c/a\xffb", "numba", "persistent", "invalid UTF-8"},
		{"/c/a\u202eb", "numba", "persistent", "control character"},
		{"/c/a\u0085b", "numba", "persistent", "control character"},
		{"/dev/shm/n", "a\x07", "lost at reboot", "control character"},
		{"/dev/shm/n", "../../etc", "lost at reboot", "not one directory name"},
		{"/dev/shm/n", "..", "lost at reboot", "not one directory name"},
	} {
		c := numbaCache(tc.root, nil)
		c.MovedBy, c.Name, c.Survival = "NUMBA_CACHE_DIR", tc.name, tc.survival
		list := PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
		if len(list) != 1 || list[0].Export != "" || !strings.Contains(list[0].Skipped, tc.why) || len(Exports(list)) != 0 {
			t.Errorf("%q (name %q): %+v; want no export, skipped for %q", tc.root, tc.name, list, tc.why)
		}
	}
}

// The variable of an export line is the registry's, found by working
// back from the root: whatever the record says moved the cache never
// reaches the shell.
func TestPersistVariableComesFromTheRegistry(t *testing.T) {
	for _, movedBy := range []string{"A=1; touch pwned; B", "1X", "X-Y", "X\n", "_Ok_9"} {
		c := numbaCache("/c/plain", nil)
		c.MovedBy = movedBy
		list := PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
		if len(list) != 1 || list[0].Skipped != "" || list[0].Export != `export NUMBA_CACHE_DIR='/c/plain'` {
			t.Errorf("moved by %q: %+v, want the registry's NUMBA_CACHE_DIR", movedBy, list)
		}
	}
}

func TestMovedRootActionUsesTheRegistrysVariable(t *testing.T) {
	c := numbaCache("/new", nil)
	c.Via, c.MovedBy = "env", "A=1; touch pwned; B"
	c.OtherRoots = []record.OtherRoot{{Path: "/home/u/.cache/numba", Files: 3, SizeBytes: 10}}
	m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(m) != 1 || m[0].Reason != MovedRoot || m[0].Action == nil ||
		m[0].ExportVar != "NUMBA_CACHE_DIR" || m[0].ExportValue != "/home/u/.cache/numba" {
		t.Errorf("misses %+v: want the registry's variable, never the record's", m)
	}
	c.OtherRoots[0].Path = "/home/u/\x1b[2J"
	m = Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(m) != 1 || m[0].Action != nil {
		t.Errorf("misses %+v: a value with an escape gets no export", m)
	}
}
