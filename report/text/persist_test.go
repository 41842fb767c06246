package text

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/fixtures"
	"github.com/coldtrace/coldtrace/record"
)

// The persist table escapes the record's strings, the moved-by column
// included, while its export lines stay shell code a user can copy.
func TestPersistTableEscapesAndKeepsExportsCopyable(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	c := func(name, root, env string) record.Cache {
		return record.Cache{Name: name, Root: root, MovedBy: env, EntriesWritten: 1, CompileNS: 1e9, FS: "ext4", Survival: "persistent"}
	}
	r.JIT = &record.JIT{Caches: []record.Cache{c("ok", "/c/it's", "OK_DIR"), c("evil", "/c/e", "A=1;\x1b[31m B")}}
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `A=1;\x1b[31m B`) {
		t.Errorf("the moved-by column is not escaped:\n%s", out)
	}
	if !strings.Contains(out, "\n    export OK_DIR='/c/it'\\''s'\n") {
		t.Errorf("the export line is not the shell line to copy:\n%s", out)
	}
}
