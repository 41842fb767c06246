package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/coldtrace/coldtrace/report/status"
)

// TestRenderCommandsWriteTheirDocumentToO: status, evict and prefetch
// print their document on stdout, and with -o PATH write it there instead,
// each JSON document under its own schema id.
func TestRenderCommandsWriteTheirDocumentToO(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(data, bytes.Repeat([]byte("x"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		cmd    func([]string, io.Writer, io.Writer) int
		args   []string
		schema string
	}{
		{"status", statusCommand, []string{"--json", data}, status.Schema},
		{"evict", evictCommand, []string{"--json", data}, "coldtrace.evict/v1"},
		{"prefetch-plan", prefetchCommand, []string{"--dry-run", "--json", data}, status.PrefetchPlanSchema},
		{"prefetch", prefetchCommand, []string{"--force", "--json", data}, status.PrefetchSchema},
	} {
		out := filepath.Join(dir, c.name+".json")
		var stdout, stderr bytes.Buffer
		if code := c.cmd(append([]string{"-o", out}, c.args...), &stdout, &stderr); code != 0 {
			t.Errorf("%s -o: exit %d: %s", c.name, code, stderr.String())
			continue
		}
		b, err := os.ReadFile(out)
		var doc struct {
			Schema string `json:"schema"`
		}
		if err != nil || json.Unmarshal(b, &doc) != nil || doc.Schema != c.schema || stdout.Len() != 0 {
			t.Errorf("%s -o: file %q (%v), schema %q want %q, stdout %d bytes", c.name, b, err, doc.Schema, c.schema, stdout.Len())
		}
		stdout.Reset()
		if code := c.cmd(c.args, &stdout, &stderr); code != 0 || !bytes.Contains(stdout.Bytes(), []byte(`"schema": "`+c.schema+`"`)) {
			t.Errorf("%s to stdout: exit %d, %q", c.name, code, stdout.String())
		}
	}
	var stderr bytes.Buffer
	if code := statusCommand([]string{"-o", filepath.Join(dir, "no", "such", "dir", "x"), data}, io.Discard, &stderr); code != exitUsage {
		t.Errorf("status -o into a missing directory: exit %d, %q", code, stderr.String())
	}
}
