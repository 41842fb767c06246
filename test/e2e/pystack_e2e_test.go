package e2e

import (
	"bufio"
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

// pyInterpreter is a CPython the stack tests run, or why it is absent.
type pyInterpreter struct{ name, path, skip string }

func pyInterpreters() []pyInterpreter {
	out := []pyInterpreter{{name: "debian-3.11", path: "/usr/bin/python3.11"}}
	if _, err := os.Stat(out[0].path); err != nil {
		out[0].skip = "Debian's python3.11 not installed"
	}
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		root = "/root/.pyenv"
	}
	for _, minor := range []string{"3.11", "3.12", "3.13"} {
		in := pyInterpreter{name: "pyenv-" + minor, skip: "no pyenv " + minor + " under " + root}
		if m, _ := filepath.Glob(filepath.Join(root, "versions", minor+".*", "bin", "python"+minor)); len(m) > 0 {
			in.path, in.skip = m[len(m)-1], ""
		}
		out = append(out, in)
	}
	// Debian sid's python3.14, where the trace/pystack tests unpacked it
	// (testdata/pystack/sid-python3.14.sh); not fetched here.
	sid := pyInterpreter{name: "sid-3.14", skip: "sid's python3.14 not unpacked: run go test ./trace/pystack first"}
	if cache, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(cache, "coldtrace", "sid-python3.14", "root", "usr", "bin", "python3.14")
		if _, err := os.Stat(p); err == nil {
			sid.path, sid.skip = p, ""
		}
	}
	return append(out, sid)
}

// spawnLines maps each "# @name" marker of testdata/pystack/spawn.py to
// its line.
func spawnLines(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if _, m, ok := strings.Cut(sc.Text(), "# @"); ok {
			out[strings.TrimSpace(m)] = n
		}
	}
	return out
}

// spawnChain is a stack's spawn.py frames, innermost first, as
// "spawn.py:LINE qualname".
func spawnChain(st *record.PyStack) []string {
	var out []string
	if st == nil {
		return nil
	}
	for _, f := range st.Frames {
		if strings.HasSuffix(f.File, "/spawn.py") {
			out = append(out, fmt.Sprintf("spawn.py:%d %s", f.Line, f.Func))
		}
	}
	return out
}

// TestCompilerCarriesPythonLineInRecordTextAndPprof: under every
// interpreter present, `coldtrace run` of a script whose function at a
// known line runs cc (subprocess.run and posix_spawn) records that stack
// for the cc process, prints it as the compile's call site, and hangs the
// Python frames under cc in the pprof profile; --no-stacks records none.
func TestCompilerCarriesPythonLineInRecordTextAndPprof(t *testing.T) {
	testenv.RequireTracing(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no cc on PATH")
	}
	script, err := filepath.Abs("../../testdata/pystack/spawn.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	for _, py := range pyInterpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			for _, how := range []string{"run", "spawn"} {
				want := []string{fmt.Sprintf("spawn.py:%d run_compiler", mk[how]),
					fmt.Sprintf("spawn.py:%d compile_kernel", mk["compile_kernel"]), fmt.Sprintf("spawn.py:%d <module>", mk["module"])}
				checkCompileStack(t, py.path, script, how, want)
			}
		})
	}
	py := pyInterpreters()[0]
	if py.skip != "" {
		t.Skip(py.skip)
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.json")
	r := runCT(t, ctOptions{}, "run", "-q", "--no-stacks", "-o", rec, "--", py.path, script, "run", dir)
	if r.code != 0 {
		t.Fatalf("--no-stacks run: exit %d: %s", r.code, r.stderr)
	}
	if got := readRecord(t, rec); len(got.Stacks) != 0 {
		t.Errorf("--no-stacks recorded %d stacks", len(got.Stacks))
	}
}

func checkCompileStack(t *testing.T, python, script, how string, want []string) {
	t.Helper()
	dir := t.TempDir()
	rec, pp, sum := filepath.Join(dir, "rec.json"), filepath.Join(dir, "p.pb.gz"), filepath.Join(dir, "sum.json")
	r := runCT(t, ctOptions{}, "run", "-q", "-o", rec, "--pprof", pp, "--json", sum, "--", python, script, how, dir)
	if r.code != 0 {
		t.Fatalf("%s: exit %d: %s", how, r.code, r.stderr)
	}
	got := readRecord(t, rec)
	var cc *record.Process
	for i := range got.Processes {
		if got.Processes[i].Comm == "cc" {
			cc = &got.Processes[i]
		}
	}
	if cc == nil {
		t.Fatalf("%s: no cc process in the record", how)
	}
	if chain := spawnChain(got.StackOf(cc)); strings.Join(chain, " ← ") != strings.Join(want, " ← ") {
		t.Errorf("%s: cc's stack %q, want %q", how, chain, want)
	}

	checkSummaryStack(t, sum, cc.PID, want)

	text := runCT(t, ctOptions{}, "report", rec)
	site := fmt.Sprintf("%s ← :%s ← :%s", want[0], strings.TrimPrefix(want[1], "spawn.py:"), strings.TrimPrefix(want[2], "spawn.py:"))
	if !strings.Contains(text.stdout, "where in the code: compiles\n  "+site+"  ") {
		t.Errorf("%s: the report names no call site %q:\n%s", how, site, text.stdout)
	}

	f, err := os.Open(pp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	wantPprof := []string{fmt.Sprintf("spawn.<module>:%d", lineOf(want[2])), fmt.Sprintf("spawn.compile_kernel:%d", lineOf(want[1])),
		fmt.Sprintf("spawn.run_compiler:%d", lineOf(want[0]))}
	if !pprofHasChainUnder(prof, fmt.Sprintf("cc[%d]", cc.PID), wantPprof) {
		t.Errorf("%s: no pprof sample with %q under cc[%d]", how, wantPprof, cc.PID)
	}
}

func lineOf(frame string) int {
	var n int
	fmt.Sscanf(strings.TrimPrefix(frame, "spawn.py:"), "%d", &n)
	return n
}

// pprofHasChainUnder reports whether a sample has, right after the
// location named proc (leaf last in this order), the spawn.py frames
// chain (outermost first) among its Python frames.
func pprofHasChainUnder(p *profile.Profile, proc string, chain []string) bool {
	for _, s := range p.Sample {
		var rootFirst []string
		for i := len(s.Location) - 1; i >= 0; i-- {
			l := s.Location[i].Line[0]
			if strings.HasPrefix(l.Function.Name, "spawn.") {
				rootFirst = append(rootFirst, fmt.Sprintf("%s:%d", l.Function.Name, l.Line))
			} else {
				rootFirst = append(rootFirst, l.Function.Name)
			}
		}
		for i, n := range rootFirst {
			if n != proc || i+len(chain) >= len(rootFirst) {
				continue
			}
			var py []string
			for _, m := range rootFirst[i+1:] {
				if strings.HasPrefix(m, "spawn.") {
					py = append(py, m)
				}
			}
			if strings.Join(py, ",") == strings.Join(chain, ",") {
				return true
			}
		}
	}
	return false
}

// checkSummaryStack: the JSON summary carries the interned stacks, and
// process pid's stack index names want's frames.
func checkSummaryStack(t *testing.T, path string, pid int32, want []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Processes []struct {
			PID   int32 `json:"pid"`
			Stack int   `json:"stack"`
		} `json:"processes"`
		Stacks []record.PyStack `json:"stacks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Processes {
		if p.PID != pid {
			continue
		}
		if p.Stack < 1 || p.Stack > len(s.Stacks) {
			t.Fatalf("summary: cc's stack %d of %d stacks", p.Stack, len(s.Stacks))
		}
		if got := spawnChain(&s.Stacks[p.Stack-1]); strings.Join(got, " ← ") != strings.Join(want, " ← ") {
			t.Errorf("summary: cc's stack %q, want %q", got, want)
		}
		return
	}
	t.Errorf("summary: no process %d", pid)
}
