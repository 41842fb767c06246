package pystack

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// interpreter is one CPython the tests run, and why it is absent.
type interpreter struct {
	name, path, skip string
}

// Interpreters are Debian's python3 and pyenv's 3.11, 3.12 and 3.13,
// each with the reason it is missing.
func interpreters() []interpreter {
	out := []interpreter{{name: "debian-3.11", path: "/usr/bin/python3.11"}}
	if _, err := os.Stat(out[0].path); err != nil {
		out[0].skip = "Debian's python3.11 not installed"
	}
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		root = "/root/.pyenv"
	}
	for _, minor := range []string{"3.11", "3.12", "3.13"} {
		in := interpreter{name: "pyenv-" + minor, skip: "no pyenv " + minor + " under " + root}
		m, _ := filepath.Glob(filepath.Join(root, "versions", minor+".*", "bin", "python"+minor))
		if len(m) > 0 {
			in.path, in.skip = m[len(m)-1], ""
		}
		out = append(out, in)
	}
	return out
}

// markers maps each "# @name" marker of a workload to its line.
func markers(t *testing.T, path string) map[string]int {
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

func workload(t *testing.T, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "pystack", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func requireCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no cc on PATH")
	}
}
