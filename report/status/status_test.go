package status

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
	"github.com/coldtrace/coldtrace/residency/outlook"
)

// The prediction of the next run, state and sentence.
func TestPredictionSaysStateAndWhy(t *testing.T) {
	const gib = 1 << 30
	triton := kcache.Cache{Name: "triton", Framework: "Triton", Exists: true, Entries: 1180,
		FS: &residency.FSFacts{FS: "ext4", Survival: residency.Persistent}}
	volatile := triton
	volatile.FS = &residency.FSFacts{FS: "tmpfs", Survival: residency.LostAtReboot}
	empty := kcache.Cache{Name: "inductor", Framework: "PyTorch Inductor"}
	off := triton
	off.Disabled = []string{"TRITON_ALWAYS_COMPILE=1: the cache is bypassed"}

	for name, tc := range map[string]struct {
		totals outlook.Totals
		rate   float64
		caches []kcache.Cache
		state  string
		want   string
	}{
		"warm": {outlook.Totals{Files: 3, SizeBytes: 13 * gib, CachedBytes: 13 * gib}, 55e6, []kcache.Cache{triton}, "warm",
			"next run: warm for model files (13.0 of 13.0 GiB cached); Triton cache: 1,180 entries"},
		"cold": {outlook.Totals{Files: 3, SizeBytes: 13 * gib, CachedBytes: gib / 10}, 55e6, []kcache.Cache{volatile, empty}, "cold",
			"next run: cold: 12.9 GiB of model files not cached — about 4 min at the disk rate of the recorded run (55 MB/s); " +
				"Triton cache: 1,180 entries (tmpfs: lost at reboot); PyTorch Inductor cache: empty, everything compiles again"},
		"no rate": {outlook.Totals{Files: 1, SizeBytes: gib}, 0, nil, "cold", "next run: cold: 1.0 GiB of model files not cached"},
		"unknown": {outlook.Totals{Files: 2, SizeBytes: gib, UnknownFiles: 2, UnknownBytes: gib}, 0, []kcache.Cache{off}, "unknown",
			"next run: unknown: this user may not see the page cache of model files (1.0 GiB); Triton cache: disabled (TRITON_ALWAYS_COMPILE=1), everything compiles again"},
		"nothing read": {outlook.Totals{}, 0, []kcache.Cache{triton}, "warm", "next run: no files to read (model files: none); Triton cache: 1,180 entries"},
		"part unknown": {outlook.Totals{Files: 2, SizeBytes: 2 * gib, CachedBytes: gib, UnknownFiles: 1, UnknownBytes: gib}, 0, nil, "warm",
			"next run: warm for model files (1.0 of 1.0 GiB cached); 1 file (1.0 GiB) unknown to this user"},
	} {
		p := outlook.Predict(tc.totals, tc.rate)
		if got := Sentence(p, tc.totals, "model files", tc.caches); p.State != tc.state || got != tc.want {
			t.Errorf("%s:\n got %s %q\nwant %s %q", name, p.State, got, tc.state, tc.want)
		}
	}
}

func TestStatusFormatting(t *testing.T) {
	for n, want := range map[int64]string{0: "0 entries", 1: "1 entry", 999: "999 entries", 1180: "1,180 entries", 1234567: "1,234,567 entries"} {
		if got := counted(n, "entry", "entries"); got != want {
			t.Errorf("counted(%d) = %q, want %q", n, got, want)
		}
	}
	for ns, want := range map[int64]string{4e6: "under 0.1 s", 2.5e9: "2.5 s", 42e9: "42 s", 235e9: "4 min"} {
		if got := RoughDuration(ns); got != want {
			t.Errorf("RoughDuration(%d) = %q, want %q", ns, got, want)
		}
	}
	if got := ShortPath("/a/very/long/path/model.safetensors", 20); !strings.HasSuffix(got, "model.safetensors") || len([]rune(got)) != 20 {
		t.Errorf("ShortPath: %q", got)
	}
}

func TestCacheRowSaysNotReadable(t *testing.T) {
	var b strings.Builder
	WriteCacheTable(&b, &Report{User: User{UID: 7, Home: "/h\x1b[1m"}, Caches: []kcache.Cache{
		{Name: "triton", Root: "/r/triton", Via: "default", NotReadable: true, Error: "statfs /r/triton: permission denied"},
		{Name: "numba", Root: "/h/numba", Via: "default"},
		{Name: "cuda\x1b[2J", Root: "/h/cuda\n", Via: "record", FS: &residency.FSFacts{FS: "ext4", Missing: true, Survival: residency.Persistent}},
	}})
	want := "  kernel caches (uid 7, HOME=/h\\x1b[1m)\n" +
		"    triton           /r/triton (via default)\n" +
		"      not readable by this user (statfs /r/triton: permission denied)\n" +
		"    cuda\\x1b[2J         /h/cuda\\n (via record)\n" +
		"      missing; would be on ext4: persistent\n" +
		"    not present: numba\n"
	if b.String() != want {
		t.Errorf("cache table:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := CacheOutlook(kcache.Cache{Framework: "Triton", NotReadable: true}); got != "Triton cache: not readable by this user" {
		t.Errorf("outlook of a cache the user cannot read: %q", got)
	}
}

func TestShortPathKeepsWholeCharacters(t *testing.T) {
	p := "/d/" + strings.Repeat("é", 40) + "/naïve-😀.bin"
	for n := 2; n < 50; n++ {
		got := ShortPath(p, n)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) != n || !strings.HasPrefix(got, "…") {
			t.Fatalf("ShortPath(%d) = %q: want %d whole characters starting with …", n, got, n)
		}
	}
	if got := ShortPath("/short", 20); got != "/short" {
		t.Errorf("a short path was cut: %q", got)
	}
}
