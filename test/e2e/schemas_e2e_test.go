package e2e

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/schematest"
)

// TestEveryDocumentMatchesItsSchema traces a real read and validates every
// JSON document the commands write about it against its committed schema:
// the summary, the record and the timeline of the run; report's summary,
// diff, merge and segments of the record; status, evict, prefetch and
// prefetch --dry-run of the file read.
func TestEveryDocumentMatchesItsSchema(t *testing.T) {
	requireTracing(t)
	dir := e2eutil.DiskDir(t)
	data := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(data, bytes.Repeat([]byte("coldtrace"), 1<<17), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	sum, rec, tl := filepath.Join(out, "s.json"), filepath.Join(out, "r.ctrace"), filepath.Join(out, "t.json")
	if r := runCT(t, ctOptions{}, "-q", "--json", sum, "-o", rec, "--timeline", tl, "--", "cat", data); r.code != 0 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	schematest.Validate(t, docSummary.Name, readDocument(t, sum))
	schematest.Validate(t, docRecord.Name, recordJSON(t, rec))
	schematest.Validate(t, docTimeline.Name, readDocument(t, tl))

	for _, c := range []struct {
		doc  schematest.Document
		args []string
	}{
		{docSummary, []string{"report", "--json", rec}},
		{docDiff, []string{"diff", "--json", rec, rec}},
		{docMerge, []string{"merge", "--json", rec, rec}},
		{docSegments, []string{"report", "--segments", "--json", rec}},
		{docStatus, []string{"status", "--json", "--from", rec}},
		{docEvict, []string{"evict", "--json", data}},
		{docPrefetchPlan, []string{"prefetch", "--dry-run", "--json", data}},
		{docPrefetch, []string{"prefetch", "--json", data}},
	} {
		r := runCT(t, ctOptions{}, c.args...)
		if r.code != 0 {
			t.Errorf("%q: exit %d: %s", c.args, r.code, r.stderr)
			continue
		}
		schematest.Validate(t, c.doc.Name, []byte(r.stdout))
	}
}

func readDocument(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordJSON is a record's JSON.
func recordJSON(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
