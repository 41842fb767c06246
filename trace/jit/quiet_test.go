package jit

import (
	"hash/fnv"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/registry"
)

// The kernel filter hashes path components with FNV-1a 64 (jit.bpf.c,
// scan_byte); user space must give it the same numbers.
func TestComponentHashIsFNV1a(t *testing.T) {
	for _, s := range []string{"", "__pycache__", "models", "ComfyUI", "a"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := componentHash(s), h.Sum64(); got != want {
			t.Errorf("componentHash(%q) = %#x, want %#x", s, got, want)
		}
	}
}

func TestAnywhereHashesOfRegistry(t *testing.T) {
	hs, ok := anywhereHashes(registry.Registry)
	if !ok {
		t.Fatalf("the registry's in-tree names (%d) do not fit the kernel's %d: the filter would be off", len(hs), quietMaxAnywhere)
	}
	for _, name := range []string{"__pycache__", "ComfyUI", "models"} {
		found := false
		for _, h := range hs {
			found = found || h == componentHash(name)
		}
		if !found {
			t.Errorf("no hash for in-tree component %q", name)
		}
	}
	many := []registry.Spec{{Paths: []string{"**/a", "**/b/c", "**/d/e"}}}
	if _, ok := anywhereHashes(many); ok {
		t.Error("five in-tree components fit in four slots")
	}
}

func TestRootPrefixKey(t *testing.T) {
	k := rootPrefixKey("/home/u/.triton/cache")
	if got := string(k.Data[:k.Prefixlen/8]); got != "/home/u/.triton/cache/" {
		t.Errorf("key %q, want the root with a trailing /", got)
	}
	if k := rootPrefixKey("/"); k.Prefixlen != 8 || k.Data[0] != '/' {
		t.Errorf("root / gives prefix %d bits %q", k.Prefixlen, k.Data[:1])
	}
	long := "/" + strings.Repeat("x", 300)
	k = rootPrefixKey(long)
	if int(k.Prefixlen) != quietPrefixLen*8 || string(k.Data[:]) != long[:quietPrefixLen] {
		t.Errorf("a long root is cut to %d bits, want its first %d bytes", k.Prefixlen, quietPrefixLen)
	}
}
