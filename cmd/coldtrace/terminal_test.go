package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

func TestLinefEscapesArgumentsNotLayout(t *testing.T) {
	var b strings.Builder
	linef(&b, "  %s: %d", "a\x1b[2J\nFAKE\tb\\", 3)
	linef(&b, "x")
	if got, want := b.String(), "  a\\x1b[2J\\nFAKE\\tb\\\\: 3\nx\n"; got != want {
		t.Errorf("linef wrote %q, want %q", got, want)
	}
	if got := errorText(errors.New("open /t/\x1b]0;t\x07: no such file")); got != `open /t/\x1b]0;t\x07: no such file` {
		t.Errorf("errorText = %q", got)
	}
}

func TestShortFilePathKeepsWholeCharacters(t *testing.T) {
	p := "/d/" + strings.Repeat("é", 40) + "/naïve-😀.bin"
	for n := 2; n < 50; n++ {
		got := shortFilePath(p, n)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) != n || !strings.HasPrefix(got, "…") {
			t.Fatalf("shortFilePath(%d) = %q: want %d whole characters starting with …", n, got, n)
		}
	}
	if got := shortFilePath("/short", 20); got != "/short" {
		t.Errorf("a short path was cut: %q", got)
	}
}

func TestWritePersistEscapesAndSkips(t *testing.T) {
	c := func(name, root, env string) record.Cache {
		return record.Cache{Name: name, Root: root, MovedBy: env, EntriesWritten: 1, CompileNS: 1e9, FS: "ext4\x1b[1m", Survival: "persistent"}
	}
	rec := &record.Record{JIT: &record.JIT{Caches: []record.Cache{
		c("numba", "/c/o'k", "NUMBA_CACHE_DIR"),
		c("triton", "/c/a\nb", "TRITON_CACHE_DIR"),
		c("cupy", "/c/b", "A=1; id; B\x1b[31m"),
	}}}
	var b bytes.Buffer
	if err := writePersist(&b, rec); err != nil {
		t.Fatal(err)
	}
	// The variables are the registry's: the record's moved-by text of the
	// CuPy cache never reaches the output.
	want := "# numba: /c/o'k (ext4\\x1b[1m, persistent), rerun cost without it 1.00 s\n" +
		"# triton: /c/a\\nb (ext4\\x1b[1m, persistent), rerun cost without it 1.00 s\n" +
		"# cupy: /c/b (ext4\\x1b[1m, persistent), rerun cost without it 1.00 s\n" +
		"# skipped: TRITON_CACHE_DIR: its value holds a control character or invalid UTF-8\n" +
		"export NUMBA_CACHE_DIR='/c/o'\\''k'\n" +
		"export CUPY_CACHE_DIR='/c/b'\n"
	if b.String() != want {
		t.Errorf("report --persist:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestCacheRowSaysNotReadable(t *testing.T) {
	var b strings.Builder
	writeCacheTable(&b, &statusReport{User: statusUser{UID: 7, Home: "/h\x1b[1m"}, Caches: []kcache.Cache{
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
	if got := cacheOutlook(kcache.Cache{Framework: "Triton", NotReadable: true}); got != "Triton cache: not readable by this user" {
		t.Errorf("outlook of a cache the user cannot read: %q", got)
	}
}
