package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
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
