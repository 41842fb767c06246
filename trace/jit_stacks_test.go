package trace

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// lineOf is the 1-based line of script holding text, or fails.
func lineOf(t *testing.T, script, text string) int {
	t.Helper()
	f, err := os.Open(script)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), text) {
			return n
		}
	}
	t.Fatalf("no %q in %s", text, script)
	return 0
}

// innermostIn is the innermost frame of st in a file named base, as
// "base:LINE qualname", or "".
func innermostIn(st *record.PyStack, base string) string {
	if st == nil {
		return ""
	}
	for _, f := range st.Frames {
		if filepath.Base(f.File) == base {
			return fmt.Sprintf("%s:%d %s", base, f.Line, f.Func)
		}
	}
	return ""
}

// TestCacheLookupsCarryTheLineThatMadeThem: the kernel cache's lookups,
// seen by the path-syscall probes in the looking-up Python thread, carry
// that thread's stack: a cold run's miss (and the compile it started) is
// charged to the line that made the key directory, a warm run's hit to
// the line that opened the entry.
func TestCacheLookupsCarryTheLineThatMadeThem(t *testing.T) {
	requireTracing(t)
	requireCC(t)
	py := realPython(t)
	script, _ := filepath.Abs("../testdata/jit/triton_like.py")
	missLine := fmt.Sprintf("triton_like.py:%d main", lineOf(t, script, "os.makedirs(key_dir, exist_ok=True)"))
	hitLine := fmt.Sprintf("triton_like.py:%d main", lineOf(t, script, "with open(grp) as f:"))
	cache := filepath.Join(t.TempDir(), "triton-cache")
	// The program runs on for 300 ms after its lookups, as a real one
	// runs its kernels: its stacks are decoded from its memory, which an
	// exit a millisecond after a warm hit can take away first on a
	// loaded machine (a stack then shows "?" frames, never a guess).
	cmd := []string{"env", "TRITON_CACHE_DIR=" + cache, py, script, "1", "120", "0.3"}

	describe := func(rec *record.Record, c *record.Cache) string {
		var b strings.Builder
		for _, sc := range c.Stacks {
			fmt.Fprintf(&b, "\n  %q: %d misses, %d hits, %d ns", innermostIn(rec.StackAt(sc.Stack), "triton_like.py"), sc.Misses, sc.Hits, sc.NS)
		}
		return b.String()
	}
	rec, _ := jitRun(t, Options{Command: cmd})
	c := findCache(rec, "triton", cache)
	if c == nil {
		t.Fatalf("no triton cache at %s in the record", cache)
	}
	var misses uint64
	var ns int64
	for _, sc := range c.Stacks {
		if innermostIn(rec.StackAt(sc.Stack), "triton_like.py") == missLine {
			misses += sc.Misses
			ns += sc.NS
		}
	}
	if misses != c.Misses || misses == 0 || ns <= 0 || ns > c.CompileNS {
		t.Errorf("cold run: %d misses, %d ns compiling: %d misses and %d ns from %q:%s", c.Misses, c.CompileNS, misses, ns, missLine,
			describe(rec, c))
	}

	rec, _ = jitRun(t, Options{Command: cmd})
	c = findCache(rec, "triton", cache)
	if c == nil {
		t.Fatalf("warm run: no triton cache at %s in the record", cache)
	}
	var hits uint64
	for _, sc := range c.Stacks {
		if innermostIn(rec.StackAt(sc.Stack), "triton_like.py") == hitLine {
			hits += sc.Hits
		}
	}
	if hits != c.Hits || hits == 0 {
		t.Errorf("warm run: %d hits, %d from %q:%s", c.Hits, hits, hitLine, describe(rec, c))
	}
}
