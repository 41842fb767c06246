package words

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func TestMadeCold(t *testing.T) {
	if s := MadeCold(nil); s != "" {
		t.Errorf("a run left as it was: %q", s)
	}
	m := &record.MadeCold{Classes: []string{"page-cache", "jit"}, EvictedFiles: 2, EvictedBytes: 64 << 20,
		KeptBytes: 8 << 10, EvictProblems: []string{"/x: no such file or directory"},
		CacheDirs: []record.ColdCacheDir{{Cache: "triton"}, {Cache: "numba"}, {Cache: "cuda"}, {Cache: "inductor"}, {Cache: "cupy"}}}
	got := MadeCold(m)
	for _, want := range []string{"--cold=page-cache,jit", "2 files evicted, 64.0 MiB dropped", "8.0 KiB stayed", "1 not evicted",
		"5 caches (triton, numba, cuda, inductor and 1 more) started empty", "own caches were not touched"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	// jit alone: nothing about the page cache.
	got = MadeCold(&record.MadeCold{Classes: []string{"jit"}, CacheDirs: []record.ColdCacheDir{{Cache: "triton"}}})
	if strings.Contains(got, "evicted") || !strings.Contains(got, "1 cache (triton) started empty") {
		t.Errorf("jit only: %q", got)
	}
}
