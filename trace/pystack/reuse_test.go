package pystack

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
)

// TestReusedCodeObjectsNeverNameAnotherFunction: 100,000 functions made
// and dropped one after another (reuse.py), half at the same first line,
// reuse the addresses of their code objects and names. Every child forked
// from one of them carries that function at the forking line, or "?"
// when the function was gone before its frames were read; never another
// function.
func TestReusedCodeObjectsNeverNameAnotherFunction(t *testing.T) {
	testenv.RequireTracing(t)
	if testing.Short() {
		t.Skip("100,000 functions: not in -short")
	}
	for _, py := range interpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			list := filepath.Join(t.TempDir(), "forks")
			stacks := traceScript(t, py.path, "reuse.py", []string{list})
			want := readForks(t, list)
			right, unknown, missing := 0, 0, 0
			for pid, w := range want {
				st, ok := stacks[pid]
				if !ok {
					missing++
					continue
				}
				var gen []string
				for _, f := range st.Frames {
					if f.Func == unknownFunc {
						unknown++
						gen = append(gen, f.Func)
					} else if strings.HasSuffix(f.File, "reuse_gen.py") || strings.HasPrefix(f.Func, "f_") {
						gen = append(gen, fmt.Sprintf("%s:%d", f.Func, f.Line))
					}
				}
				switch {
				case len(gen) == 1 && gen[0] == w:
					right++
				case len(gen) == 1 && gen[0] == unknownFunc:
				default:
					t.Errorf("child %d of %s carries %q", pid, w, gen)
				}
			}
			t.Logf("%d forks: %d named right, %d frames \"?\", %d without a stack", len(want), right, unknown, missing)
			if len(want) < 1500 || right < len(want)/2 {
				t.Errorf("%d of %d forks named their function; want at least half", right, len(want))
			}
		})
	}
}

// readForks reads reuse.py's list: pid → "f_N:LINE".
func readForks(t *testing.T, path string) map[int32]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int32]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		pid, err := strconv.Atoi(fs[0])
		if err != nil || len(fs) != 3 {
			t.Fatalf("%s: bad line %q", path, sc.Text())
		}
		out[int32(pid)] = fs[1] + ":" + fs[2]
	}
	return out
}
