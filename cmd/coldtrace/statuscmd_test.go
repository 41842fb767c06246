package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// A record whose run read nothing from disk and used only an in-tree
// cache still gets a table and a prediction.
func TestStatusRecordWithoutFiles(t *testing.T) {
	t.Setenv("SUDO_UID", "")
	path := filepath.Join(t.TempDir(), "r.ctrace")
	rec := &record.Record{Schema: record.Schema, WallNS: 1e9,
		JIT: &record.JIT{Caches: []record.Cache{{Name: "python", Framework: "Python bytecode", Root: "**/__pycache__"}}}}
	if err := record.WriteFile(path, rec); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := statusCommand([]string{"--from", path}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "next run: no files to read") || !strings.Contains(out.String(), "kernel caches") {
		t.Errorf("exit %d\n%s%s", code, out.String(), errb.String())
	}
}
