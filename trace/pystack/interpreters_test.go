package pystack

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// interpreter is one CPython the tests run, and why it is absent.
type interpreter struct {
	name, path, skip string
}

// Interpreters are Debian's python3, pyenv's 3.11, 3.12 and 3.13, and
// Debian sid's 3.14 (sidPython314), each with the reason it is missing.
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
	path, skip := sidPython314()
	return append(out, interpreter{name: "sid-3.14", path: path, skip: skip})
}

// sidOnce fetches sid's python3.14 once per test binary.
var sidOnce = sync.OnceValues(fetchSidPython314)

// sidPython314 is Debian sid's python3.14 unpacked, not installed, in
// the user's cache directory (testdata/pystack/sid-python3.14.sh), or why
// it is absent: fetched once when missing, unless -short or
// COLDTRACE_NO_FETCH=1.
func sidPython314() (path, skip string) { return sidOnce() }

func fetchSidPython314() (string, string) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "no cache directory for sid's python3.14: " + err.Error()
	}
	dir := filepath.Join(cache, "coldtrace", "sid-python3.14")
	py := filepath.Join(dir, "root", "usr", "bin", "python3.14")
	if _, err := os.Stat(py); err == nil {
		return py, ""
	}
	if testing.Short() || os.Getenv("COLDTRACE_NO_FETCH") == "1" {
		return "", "sid's python3.14 not unpacked in " + dir + " (not fetched under -short or COLDTRACE_NO_FETCH=1)"
	}
	for _, tool := range []string{"apt-get", "dpkg-deb", "patchelf"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", "no " + tool + " to unpack Debian sid's python3.14"
		}
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "pystack", "sid-python3.14.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", script, dir).CombinedOutput()
	if err != nil {
		tail := strings.TrimSpace(string(out))
		if len(tail) > 300 {
			tail = tail[len(tail)-300:]
		}
		return "", fmt.Sprintf("cannot unpack Debian sid's python3.14 (%v): %s", err, tail)
	}
	return py, ""
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
