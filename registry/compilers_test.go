package registry

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	m := NewCompilerNames([]string{"mycc"})
	for name, want := range map[string]bool{
		"gcc": true, "gcc-13": true, "clang++-18.1": true, "x86_64-linux-gnu-g++-13": true,
		"x86_64-linux-gnu-ld": true, "ptxas": true, "mycc": true, "lto1": true,
		"python3": false, "my-ld": false, "": false, "bash": false, "gcc-x": false,
	} {
		if got := m.Match(name); got != want {
			t.Errorf("Match(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestQueriesOnly(t *testing.T) {
	for args, want := range map[string]bool{
		"rustc --version":                 true,
		"rustc -vV":                       true,
		"rustc --print sysroot":           true,
		"rustc --print=cfg --version":     true,
		"gcc -dumpversion":                true,
		"gcc -print-prog-name=cc1plus":    true,
		"x86_64-linux-gnu-gcc-12 -v":      true,
		"nvcc --version":                  true,
		"gcc -v x.c":                      false,
		"rustc --print":                   false, // a query without its value: rustc fails, nothing known
		"rustc --edition=2021 lib.rs":     false,
		"cc -c -o x.o x.c":                false,
		"ld":                              false, // no arguments read
		"ninja -C build":                  false,
		"clang -x c -E -dM /dev/null":     false,
		"c++ --version --save-temps x.cc": false,
	} {
		if got := QueriesOnly(strings.Fields(args)); got != want {
			t.Errorf("QueriesOnly(%q) = %v, want %v", args, got, want)
		}
	}
}
