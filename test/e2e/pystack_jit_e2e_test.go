package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
)

// numbaChain is a stack's frames in numba_cache.py, innermost first, as
// "numba_cache.py:LINE qualname".
func numbaChain(st *record.PyStack) []string {
	var out []string
	if st == nil {
		return nil
	}
	for _, f := range st.Frames {
		if strings.HasSuffix(f.File, "/numba_cache.py") {
			out = append(out, fmt.Sprintf("numba_cache.py:%d %s", f.Line, f.Func))
		}
	}
	return out
}

// TestNumbaCompileCarriesPythonLineInRecordTextAndPprof: under every
// interpreter present that has Numba, a cache=True function compiled
// from a function at a known line charges its compile to that line: the
// compile calls' windows (llvmlite's uprobes) and the cache miss's
// window carry the stack in the record, the cache's stacks count the
// miss and its compile time, the JSON summary splits the compile time
// over it, the text names it under "where in the code", and the pprof
// profile hangs its frames under the compiling process. A rerun finds
// the entry: the same line's hit.
func TestNumbaCompileCarriesPythonLineInRecordTextAndPprof(t *testing.T) {
	testenv.RequireTracing(t)
	script, err := filepath.Abs("../../testdata/pystack/numba_cache.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	want := []string{fmt.Sprintf("numba_cache.py:%d compile_kernel", mk["call"]), fmt.Sprintf("numba_cache.py:%d main", mk["main"]),
		fmt.Sprintf("numba_cache.py:%d <module>", mk["module"])}
	for _, py := range pyInterpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			if exec.Command(py.path, "-c", "import numba").Run() != nil {
				t.Skipf("no Numba for %s", py.path)
			}
			cache := t.TempDir()
			got, dir := runNumba(t, py.path, script, cache)
			checkNumbaRecord(t, got, want)
			checkNumbaSummary(t, filepath.Join(dir, "sum.json"), want)
			text := runCT(t, ctOptions{}, "report", filepath.Join(dir, "rec.json"))
			site := want[0] + " ← :" + strings.TrimPrefix(want[1], "numba_cache.py:") + " ← :" + strings.TrimPrefix(want[2], "numba_cache.py:")
			_, compiles, _ := strings.Cut(text.stdout, "where in the code: compiles\n")
			_, lookups, _ := strings.Cut(text.stdout, "where in the code: cache lookups\n")
			if !strings.Contains(compiles, "  "+site) || !strings.Contains(lookups, "    "+site) {
				t.Errorf("the report names no compile and no cache lookup at %q:\n%s", site, text.stdout)
			}
			checkNumbaPprof(t, filepath.Join(dir, "p.pb.gz"), want)
			checkNumbaTimeline(t, filepath.Join(dir, "rec.json"), want[0])

			// The rerun hits the entry the first run wrote, from that line.
			again, _ := runNumba(t, py.path, script, cache)
			c := numbaCache(t, again)
			var hits uint64
			for _, sc := range c.Stacks {
				if strings.Join(numbaChain(again.StackAt(sc.Stack)), " ← ") == strings.Join(want, " ← ") {
					hits += sc.Hits
				}
			}
			if c.Hits == 0 || hits != c.Hits {
				t.Errorf("rerun: %d hits, %d of them from %q: %+v", c.Hits, hits, want, c.Stacks)
			}
		})
	}
}

// runNumba runs script under coldtrace with its Numba cache in cache and
// returns the record and the directory of its outputs.
func runNumba(t *testing.T, python, script, cache string) (*record.Record, string) {
	t.Helper()
	dir := t.TempDir()
	rec, pp, sum := filepath.Join(dir, "rec.json"), filepath.Join(dir, "p.pb.gz"), filepath.Join(dir, "sum.json")
	r := runCT(t, ctOptions{env: []string{"NUMBA_CACHE_DIR=" + cache}}, "run", "-q", "-o", rec, "--pprof", pp, "--json", sum, "--",
		python, script)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	return readRecord(t, rec), dir
}

func numbaCache(t *testing.T, r *record.Record) *record.Cache {
	t.Helper()
	if r.JIT != nil {
		for i := range r.JIT.Caches {
			if r.JIT.Caches[i].Name == "numba" {
				return &r.JIT.Caches[i]
			}
		}
	}
	t.Fatalf("no numba cache in the record")
	return nil
}

// checkNumbaRecord: a compile call (uprobe) and the cache miss (in
// process) have want as their windows' stack, and the cache's stacks
// give that line its miss and the miss's compile time.
func checkNumbaRecord(t *testing.T, r *record.Record, want []string) {
	t.Helper()
	is := func(idx int) bool {
		return strings.Join(numbaChain(r.StackAt(idx)), " ← ") == strings.Join(want, " ← ")
	}
	kinds := map[string]bool{}
	var windows []string
	for _, w := range r.JIT.Windows {
		windows = append(windows, fmt.Sprintf("%s %s %q", w.Kind, w.Source, numbaChain(r.StackAt(w.Stack))))
		if w.Stack > 0 && is(w.Stack) {
			kinds[w.Kind] = true
		}
	}
	if !kinds["uprobe"] || !kinds["in_process"] {
		t.Errorf("windows with stack %q: %v; want a compile call's and the miss's:\n%s", want, kinds, strings.Join(windows, "\n"))
	}
	c := numbaCache(t, r)
	var misses uint64
	var ns int64
	for _, sc := range c.Stacks {
		if is(sc.Stack) {
			misses += sc.Misses
			ns += sc.NS
		}
	}
	if misses == 0 || misses > c.Misses || ns <= 0 || ns > c.CompileNS {
		t.Errorf("cache stacks %+v (misses %d, compile %d ns): want %q's misses and compile time", c.Stacks, c.Misses, c.CompileNS, want)
	}
}

// checkNumbaSummary: the JSON summary's compile row splits an in-process
// source's time over want's stack.
func checkNumbaSummary(t *testing.T, path string, want []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Attribution struct {
			Breakdown []struct {
				Category  string `json:"category"`
				Compilers []struct {
					Kind   string `json:"kind"`
					Name   string `json:"name"`
					Stacks []struct {
						Stack int   `json:"stack"`
						NS    int64 `json:"ns"`
					} `json:"stacks"`
				} `json:"compilers"`
			} `json:"breakdown"`
		} `json:"attribution"`
		Stacks []record.PyStack `json:"stacks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, row := range s.Attribution.Breakdown {
		if row.Category != "jit_compile" {
			continue
		}
		for _, c := range row.Compilers {
			for _, sh := range c.Stacks {
				if sh.Stack < 1 || sh.Stack > len(s.Stacks) {
					t.Fatalf("summary: %s's stack %d of %d", c.Name, sh.Stack, len(s.Stacks))
				}
				chain := numbaChain(&s.Stacks[sh.Stack-1])
				if strings.Join(chain, " ← ") == strings.Join(want, " ← ") && sh.NS > 0 {
					return
				}
				seen = append(seen, fmt.Sprintf("%s %s: %q %d ns", c.Kind, c.Name, chain, sh.NS))
			}
		}
	}
	t.Errorf("summary: no compile time on %q; stacks:\n%s", want, strings.Join(seen, "\n"))
}

// checkNumbaPprof: a compile sample has want's frames (outermost first,
// module.qualname:line) under the python process, and `go tool pprof
// -traces -lines` prints the call's line.
func checkNumbaPprof(t *testing.T, path string, want []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Parse(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var chain []string
	for i := len(want) - 1; i >= 0; i-- {
		var line int
		var fn string
		fmt.Sscanf(strings.TrimPrefix(want[i], "numba_cache.py:"), "%d %s", &line, &fn)
		chain = append(chain, fmt.Sprintf("numba_cache.%s:%d", fn, line))
	}
	found := false
	for _, s := range prof.Sample {
		var rootFirst, py []string
		for i := len(s.Location) - 1; i >= 0; i-- {
			l := s.Location[i].Line[0]
			rootFirst = append(rootFirst, l.Function.Name)
			if strings.HasPrefix(l.Function.Name, "numba_cache.") {
				py = append(py, fmt.Sprintf("%s:%d", l.Function.Name, l.Line))
			}
		}
		if len(rootFirst) > 3 && rootFirst[0] == "JIT compile" && strings.HasPrefix(rootFirst[2], "python") &&
			strings.Join(py, ",") == strings.Join(chain, ",") && s.Value[0] > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("pprof: no JIT compile sample with %q under a python process", chain)
	}
	if _, err := exec.LookPath("go"); err != nil {
		return
	}
	out, err := exec.Command("go", "tool", "pprof", "-traces", "-lines", path).CombinedOutput()
	if err != nil {
		t.Logf("go tool pprof: %v", err)
		return
	}
	name, line, _ := strings.Cut(chain[len(chain)-1], ":")
	if !strings.Contains(string(out), name+" ") || !strings.Contains(string(out), "numba_cache.py:"+line) {
		t.Errorf("go tool pprof -traces -lines shows no %s at numba_cache.py:%s:\n%s", name, line, out)
	}
}

// checkNumbaTimeline: the timeline's compile slices of the compile call
// and the miss (JIT windows) name the line that compiled (site, then its
// callers), not the stack the process was started from (none: it was
// not forked by Python).
func checkNumbaTimeline(t *testing.T, rec, site string) {
	t.Helper()
	r := runCT(t, ctOptions{}, "report", "--timeline", "-", rec)
	if r.code != 0 {
		t.Fatalf("report --timeline -: exit %d: %s", r.code, r.stderr)
	}
	var doc struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	kinds := map[any]bool{}
	var seen []string
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" || (e.Args["kind"] != "uprobe" && e.Args["kind"] != "in_process") {
			continue
		}
		seen = append(seen, fmt.Sprintf("%v %v: %v", e.Args["kind"], e.Args["source"], e.Args["stack"]))
		if stack, _ := e.Args["stack"].(string); strings.HasPrefix(stack, site+" ←") {
			kinds[e.Args["kind"]] = true
		}
	}
	if !kinds["uprobe"] || !kinds["in_process"] {
		t.Errorf("no compile-call and miss slices at %q in the timeline:\n%s", site, strings.Join(seen, "\n"))
	}
}
