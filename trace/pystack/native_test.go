package pystack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/sched"
)

// loadSensors loads the scheduler and the stack sensor for one test.
func loadSensors(t *testing.T) (*sched.Sensor, *Sensor) {
	t.Helper()
	sc, err := sched.New(sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	s, err := New(Options{TaskStates: sc.Shared().TaskStates, Tracked: sc.Shared().Tracked})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	t.Cleanup(func() { s.Close() })
	return sc, s
}

// buildC compiles a C program into dir with extra flags.
func buildC(t *testing.T, dir, name, src string, flags ...string) string {
	t.Helper()
	requireCC(t)
	c, bin := filepath.Join(dir, name+".c"), filepath.Join(dir, name)
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", append(append([]string{"-O1"}, flags...), "-o", bin, c)...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", name, err, out)
	}
	return bin
}

// nativeLeaves are the one-frame native stacks among stacks.
func nativeLeaves(stacks map[int32]record.PyStack) []record.PyFrame {
	var out []record.PyFrame
	for _, st := range stacks {
		if len(st.Frames) == 1 && st.Frames[0].Native {
			out = append(out, st.Frames[0])
		}
	}
	return out
}

// TestNativeLeafOfAProgramWithoutPython: a C program that forks through
// the C library gets, for its child, the C library's fork wrapper as its
// one frame, named from the library's symbols.
func TestNativeLeafOfAProgramWithoutPython(t *testing.T) {
	testenv.RequireTracing(t)
	bin := buildC(t, t.TempDir(), "forker", `#include <unistd.h>
#include <sys/wait.h>
int main(void) {
	pid_t p = fork();
	if (p == 0) {
		usleep(100000); /* the parent lives on while its leaf is read */
		_exit(0);
	}
	waitpid(p, 0, 0);
	return 0;
}
`)
	sc, s := loadSensors(t)
	leaves := nativeLeaves(traceArgv(t, sc, s, []string{bin}))
	if len(leaves) != 1 {
		t.Fatalf("native leaves %+v, want one (the child's)", leaves)
	}
	f := leaves[0]
	wrappers := map[string]bool{"_Fork": true, "fork": true, "__libc_fork": true, "__fork": true, "arch_fork": true}
	if !strings.HasPrefix(filepath.Base(f.File), "libc.so") || !wrappers[f.Func] || f.Line != 0 {
		t.Errorf("leaf %+v, want the C library's fork wrapper", f)
	}
}

// TestNativeLeafWithoutSymbolIsModuleOffset: in a stripped executable
// that makes the fork system call itself, the leaf has no symbol to lie
// in and is named module+0xOFFSET, the offset inside the file's text.
func TestNativeLeafWithoutSymbolIsModuleOffset(t *testing.T) {
	testenv.RequireTracing(t)
	bin := buildC(t, t.TempDir(), "rawfork", `#include <unistd.h>
#include <sys/wait.h>
int main(void) {
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(57L) : "rcx", "r11", "memory");
	if (r == 0) {
		usleep(100000); /* the parent lives on while its leaf is read */
		_exit(0);
	}
	wait(0);
	return 0;
}
`, "-s")
	sc, s := loadSensors(t)
	leaves := nativeLeaves(traceArgv(t, sc, s, []string{bin}))
	if len(leaves) != 1 {
		t.Fatalf("native leaves %+v, want one", leaves)
	}
	f := leaves[0]
	off, ok := strings.CutPrefix(f.Func, "rawfork+0x")
	n, err := strconv.ParseUint(off, 16, 64)
	st, _ := os.Stat(bin)
	if f.File != bin || !ok || err != nil || n == 0 || int64(n) > st.Size() {
		t.Errorf("leaf %+v, want rawfork+0xOFFSET in %s", f, bin)
	}
}

// TestNativeLeafInCxxIsDemangled: a C++ program whose function template
// in a namespace makes the fork system call itself gets, for its child,
// that function as its leaf, named as C++ names it (loader::spawn, no
// template arguments), its linkage name kept as the frame's symbol.
func TestNativeLeafInCxxIsDemangled(t *testing.T) {
	testenv.RequireTracing(t)
	cxx, err := exec.LookPath("c++")
	if err != nil {
		t.Skip("no C++ compiler (c++) to build the workload")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "spawner.cc"), filepath.Join(dir, "spawner")
	if err := os.WriteFile(src, []byte(`#include <unistd.h>
#include <sys/wait.h>
namespace loader {
template <int N> __attribute__((noinline)) long spawn() {
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(57L) : "rcx", "r11", "memory");
	return r + N - N;
}
}
int main() {
	if (loader::spawn<3>() == 0) {
		usleep(100000); /* the parent lives on while its leaf is read */
		_exit(0);
	}
	wait(0);
	return 0;
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cxx, "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("c++ spawner: %v\n%s", err, out)
	}
	sc, s := loadSensors(t)
	leaves := nativeLeaves(traceArgv(t, sc, s, []string{bin}))
	if len(leaves) != 1 {
		t.Fatalf("native leaves %+v, want one (the child's)", leaves)
	}
	f := leaves[0]
	if f.File != bin || f.Func != "loader::spawn" || f.Symbol != "_ZN6loader5spawnILi3EEElv" || f.Line != 0 {
		t.Errorf("leaf %+v, want loader::spawn (linkage _ZN6loader5spawnILi3EEElv) in %s", f, bin)
	}
}

// TestUnsupportedPythonGetsNativeLeafAndNote: Python 3.10 has no known
// frame layout: its compiler gets the native leaf (no guessed Python
// frames), and the record's notes say why.
func TestUnsupportedPythonGetsNativeLeafAndNote(t *testing.T) {
	testenv.RequireTracing(t)
	requireCC(t)
	m, _ := filepath.Glob("/root/.pyenv/versions/3.10.*/bin/python3.10")
	if len(m) == 0 {
		t.Skip("no pyenv 3.10 under /root/.pyenv")
	}
	sc, s := loadSensors(t)
	stacks := traceWith(t, sc, s, m[0], "spawn.py", []string{"run", t.TempDir()})
	leaves := nativeLeaves(stacks)
	if len(leaves) == 0 || len(leaves) != len(stacks) {
		t.Errorf("%d stacks, %d native leaves; want every stack a native leaf", len(stacks), len(leaves))
	}
	for _, f := range leaves {
		if f.File == "" || f.Func == "" || f.Func == unknownFunc {
			t.Errorf("leaf %+v", f)
		}
	}
	notes := strings.Join(s.Notes(), "\n")
	if !strings.Contains(notes, "3.10 or older") {
		t.Errorf("notes %q: want one saying 3.10 has no known layout", notes)
	}
}
