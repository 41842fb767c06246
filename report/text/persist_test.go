package text

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// The persist table escapes the record's strings, the roots included,
// while its export lines stay shell code a user can copy; the variable
// is the registry's, not the record's moved-by text.
func TestPersistTableEscapesAndKeepsExportsCopyable(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	c := func(name, root, env string) record.Cache {
		return record.Cache{Name: name, Root: root, MovedBy: env, EntriesWritten: 1, CompileNS: 1e9, FS: "ext4", Survival: "persistent"}
	}
	r.JIT = &record.JIT{Caches: []record.Cache{c("numba", "/c/it's", "NUMBA_CACHE_DIR"), c("triton", "/c/e\x1b[31m", "A=1;\x1b[31m B")}}
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `/c/e\x1b[31m`) || strings.Contains(out, "A=1;") {
		t.Errorf("the root is not escaped, or the record's moved-by text is shown:\n%s", out)
	}
	if !strings.Contains(out, "\n    export NUMBA_CACHE_DIR='/c/it'\\''s'\n") {
		t.Errorf("the export line is not the shell line to copy:\n%s", out)
	}
}
