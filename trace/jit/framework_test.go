package jit

import (
	"slices"
	"testing"

	"github.com/coldtrace/coldtrace/registry"
)

// FrameworkVar finds the variables that place or switch a framework's
// cache, never the generic ones a path is built from.
func TestFrameworkVar(t *testing.T) {
	for env, want := range map[string]string{
		"HOME=/h\x00TMPDIR=/t\x00XDG_CACHE_HOME=/c": "",
		"HOME=/h\x00TRITON_CACHE_DIR=/x":            "TRITON_CACHE_DIR",
		"TRITON_CACHE_DIR=\x00CUDA_CACHE_DISABLE=1": "CUDA_CACHE_DISABLE",
		"TORCHINDUCTOR_FORCE_DISABLE_CACHES=1":      "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
	} {
		if got := FrameworkVar(registry.ParseEnviron([]byte(env))); got != want {
			t.Errorf("%q: %q, want %q", env, got, want)
		}
	}
	vars := frameworkVars(registry.Registry)
	for i, v := range vars {
		if genericVars[v] || slices.Contains(vars[i+1:], v) {
			t.Errorf("frameworkVars has %q generic or twice: %q", v, vars)
		}
	}
}

// noteUse's memo by base name gives what the globs give.
func TestNoteUseMemo(t *testing.T) {
	c, err := NewCollector(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c.noteUse(10, "/usr/lib/libtriton.so.3")
		c.noteUse(11, "/bin/true")
	}
	if !c.used["triton"][10] || len(c.used) != 1 {
		t.Errorf("used %v, want triton by pid 10 alone", c.used)
	}
}
