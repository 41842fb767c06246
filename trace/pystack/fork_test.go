package pystack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	bpfpy "github.com/coldtrace/coldtrace/bpf/pystack"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/sched"
)

// traceWorkload runs python on spawn.py in mode how as a traced process
// and returns the stacks its processes were started from.
func traceWorkload(t *testing.T, python, how string, wrap ...string) map[int32]record.PyStack {
	return traceScript(t, python, "spawn.py", []string{how, t.TempDir()}, wrap...)
}

// traceScript runs python on the testdata script name with args, as a
// traced process (under the wrap command, if any).
func traceScript(t *testing.T, python, name string, args []string, wrap ...string) map[int32]record.PyStack {
	t.Helper()
	sc, err := sched.New(sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s, err := New(Options{TaskStates: sc.Shared().TaskStates, Tracked: sc.Shared().Tracked})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer s.Close()
	return traceWith(t, sc, s, python, name, args, wrap...)
}

// traceWith runs the script as traceScript does, with sensors loaded.
func traceWith(t *testing.T, sc *sched.Sensor, s *Sensor, python, name string, args []string, wrap ...string) map[int32]record.PyStack {
	t.Helper()
	return traceArgv(t, sc, s, append(append(append([]string(nil), wrap...), python, workload(t, name)), args...))
}

// traceArgv runs argv as a traced process with the sensors loaded and
// returns the stacks its processes were started from.
func traceArgv(t *testing.T, sc *sched.Sensor, s *Sensor, argv []string) map[int32]record.PyStack {
	t.Helper()
	// The shell waits on stdin until it is tracked, then becomes the
	// command: the exec is seen, as the session's gated launch sees it.
	argv = append([]string{"sh", "-c", `read x; exec "$0" "$@"`}, argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := sc.Seed(cmd.Process.Pid, "sh", probe.MonotonicNS()); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	fmt.Fprintln(in)
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%q: %v\n%s", argv[3:], err, out.String())
	}
	if err := s.Finish(&record.Record{}); err != nil {
		t.Fatal(err)
	}
	if n := s.Notes(); len(n) > 0 {
		t.Logf("notes: %q", n)
	}
	walks, fresh, dropped := s.Counts()
	t.Logf("%s: %d walks, %d new stacks, %d dropped", filepath.Base(argv[3]), walks, fresh, dropped)
	return s.ProcessStacks()
}

// frameText is a frame as the tests compare it: base name:line qualname.
func frameText(f record.PyFrame) string {
	i := strings.LastIndexByte(f.File, '/')
	return fmt.Sprintf("%s:%d %s", f.File[i+1:], f.Line, f.Func)
}

// spawnFrames are the stack's frames in spawn.py, innermost first.
func spawnFrames(st record.PyStack) []string {
	var out []string
	for _, f := range st.Frames {
		if strings.HasSuffix(f.File, "/spawn.py") {
			out = append(out, frameText(f))
		}
	}
	return out
}

// TestForkStackNamesTheCompilingLine: for every interpreter present, the
// compiler a Python function runs (through subprocess.run, posix_spawn,
// or from a multiprocessing fork child) and the compiler's own children
// carry the exact spawn.py lines and functions that ran it.
func TestForkStackNamesTheCompilingLine(t *testing.T) {
	testenv.RequireTracing(t)
	requireCC(t)
	mk := markers(t, workload(t, "spawn.py"))
	want := map[string][]string{
		"run": {fmt.Sprintf("spawn.py:%d run_compiler", mk["run"]), fmt.Sprintf("spawn.py:%d compile_kernel", mk["compile_kernel"]),
			fmt.Sprintf("spawn.py:%d <module>", mk["module"])},
		"spawn": {fmt.Sprintf("spawn.py:%d run_compiler", mk["spawn"]), fmt.Sprintf("spawn.py:%d compile_kernel", mk["compile_kernel"]),
			fmt.Sprintf("spawn.py:%d <module>", mk["module"])},
		"fork": {fmt.Sprintf("spawn.py:%d run_compiler", mk["run"]), fmt.Sprintf("spawn.py:%d compile_kernel", mk["compile_kernel"]),
			fmt.Sprintf("spawn.py:%d child", mk["child"]), fmt.Sprintf("spawn.py:%d <module>", mk["start"])},
	}
	for _, py := range interpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			for _, how := range []string{"run", "spawn", "fork"} {
				stacks := traceWorkload(t, py.path, how)
				w := strings.Join(want[how], " ← ")
				matched := 0
				var seen []string
				for _, st := range stacks {
					got := strings.Join(spawnFrames(st), " ← ")
					seen = append(seen, got)
					if got == w {
						matched++
					}
				}
				// cc, and the cc1 and as it runs, inherit the stack.
				if matched < 3 {
					t.Errorf("%s %s: %d processes carry %q, want ≥ 3 (cc, cc1, as); stacks seen: %q", py.name, how, matched, w, seen)
				}
				if os.Getenv("PYSTACK_VERBOSE") != "" {
					t.Logf("%s %s: %q", py.name, how, seen)
				}
			}
		})
	}
}

// TestForkStackInsidePidNamespace: inside a new pid namespace CPython
// knows its threads by their namespace tids; the walker matches them so,
// and the compiler still carries the line that ran it.
func TestForkStackInsidePidNamespace(t *testing.T) {
	testenv.RequireTracing(t)
	requireCC(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare on PATH")
	}
	mk := markers(t, workload(t, "spawn.py"))
	want := fmt.Sprintf("spawn.py:%d run_compiler ← spawn.py:%d compile_kernel ← spawn.py:%d <module>", mk["run"], mk["compile_kernel"], mk["module"])
	for _, py := range interpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			matched := 0
			for _, st := range traceWorkload(t, py.path, "run", "unshare", "--pid", "--fork") {
				if strings.Join(spawnFrames(st), " ← ") == want {
					matched++
				}
			}
			if matched < 3 {
				t.Errorf("%d processes carry %q inside the namespace, want ≥ 3", matched, want)
			}
		})
	}
}

// TestDeepStackKeepsInnermostAndOutermost: a compiler run 200 calls deep
// carries the 64 innermost frames, a gap counting the frames left out,
// and the 16 outermost, the outermost being the module line that started
// the chain.
func TestDeepStackKeepsInnermostAndOutermost(t *testing.T) {
	testenv.RequireTracing(t)
	requireCC(t)
	mk := markers(t, workload(t, "deep.py"))
	for _, py := range interpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			stacks := traceScript(t, py.path, "deep.py", []string{t.TempDir()})
			matched := 0
			for _, st := range stacks {
				fr := st.Frames
				if len(fr) != 64+1+16 || fr[64].Func != record.GapFunc || st.Truncated {
					t.Errorf("%d frames, gap %q, truncated %v; want 64 + gap + 16", len(fr), fr[min(64, len(fr)-1)].Func, st.Truncated)
					continue
				}
				// Frames: the subprocess ones, run at @leaf, 201 of nest, <module>.
				total := len(fr) - 1 + st.Omitted
				outer, leaf := frameText(fr[len(fr)-1]), ""
				for _, f := range fr {
					if f.Func == "nest" {
						leaf = frameText(f)
						break
					}
				}
				if outer != fmt.Sprintf("deep.py:%d <module>", mk["outer"]) || leaf != fmt.Sprintf("deep.py:%d nest", mk["leaf"]) || total < 202 {
					t.Errorf("outermost %q, innermost nest %q, %d frames in all; want deep.py:%d <module>, deep.py:%d nest, ≥ 202",
						outer, leaf, total, mk["outer"], mk["leaf"])
					continue
				}
				matched++
			}
			if matched < 3 {
				t.Errorf("%d processes carry the deep stack, want ≥ 3 (cc, cc1, as)", matched)
			}
		})
	}
}

// TestNestedImportsKeepTheScriptsLine: a compiler run by the last of 24
// nested imports (more frames than a stack keeps) carries, past the gap,
// the script's import line as its outermost frame, and the innermost
// module's line among the frames kept.
func TestNestedImportsKeepTheScriptsLine(t *testing.T) {
	testenv.RequireTracing(t)
	requireCC(t)
	mk := markers(t, workload(t, "imports.py"))
	for _, py := range interpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			stacks := traceScript(t, py.path, "imports.py", []string{t.TempDir()})
			matched := 0
			for _, st := range stacks {
				fr := st.Frames
				if len(fr) != 64+1+16 || fr[64].Func != record.GapFunc || st.Omitted <= 0 {
					t.Errorf("%d frames, %d omitted; want 64 + gap + 16", len(fr), st.Omitted)
					continue
				}
				inner := ""
				for _, f := range fr[:64] {
					if strings.HasSuffix(f.File, "/nest23.py") {
						inner = frameText(f)
						break
					}
				}
				outer := frameText(fr[len(fr)-1])
				if outer != fmt.Sprintf("imports.py:%d <module>", mk["outer"]) || inner != "nest23.py:2 <module>" {
					t.Errorf("outermost %q, innermost module %q; want imports.py:%d <module>, nest23.py:2 <module>", outer, inner, mk["outer"])
					continue
				}
				matched++
			}
			if matched < 3 {
				t.Errorf("%d processes carry the import chain's stack, want ≥ 3 (cc, cc1, as)", matched)
			}
		})
	}
}

// TestKnownExecutableConfiguredAtExec: once a fixed-address Python
// (Debian's static, non-PIE python3) has been located, a later exec of
// the same file is configured by the kernel itself: with user space's
// locating of execs turned off, its compiler still carries its line.
func TestKnownExecutableConfiguredAtExec(t *testing.T) {
	testenv.RequireTracing(t)
	requireCC(t)
	py := interpreters()[0]
	if py.skip != "" {
		t.Skip(py.skip)
	}
	sc, err := sched.New(sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s, err := New(Options{TaskStates: sc.Shared().TaskStates, Tracked: sc.Shared().Tracked})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer s.Close()
	s.Seed(running(t, py.path))
	s.wg.Wait()
	if n := countEntries(t, s); n != 1 {
		t.Fatalf("%d known executables after locating %s, want 1", n, py.path)
	}
	s.noExecLocate.Store(true)
	mk := markers(t, workload(t, "spawn.py"))
	want := fmt.Sprintf("spawn.py:%d run_compiler ← spawn.py:%d compile_kernel ← spawn.py:%d <module>", mk["run"], mk["compile_kernel"], mk["module"])
	matched := 0
	for _, st := range traceWith(t, sc, s, py.path, "spawn.py", []string{"run", t.TempDir()}) {
		if strings.Join(spawnFrames(st), " ← ") == want {
			matched++
		}
	}
	if matched < 3 {
		t.Errorf("%d processes carry %q, want ≥ 3", matched, want)
	}
}

func countEntries(t *testing.T, s *Sensor) int {
	t.Helper()
	var k bpfpy.PystackPyExeKey
	var v bpfpy.PystackPyConf
	n := 0
	it := s.objs.PyExes.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
