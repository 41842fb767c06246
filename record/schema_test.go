package record_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"

	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// recordDoc is the record file's JSON (gzip-compressed on disk).
var recordDoc = schematest.Document{Name: "record", ID: record.Schema, Type: record.Record{}}

// TestJSONSchema holds docs/schemas/record.schema.json to record.Record.
func TestJSONSchema(t *testing.T) { schematest.Check(t, recordDoc) }

// Every recorded run under testdata/records, as committed and as Encode
// writes it again (its samples by a hand-written encoder, not by the
// field tags the schema is made from), is a valid record.
func TestRecordsMatchTheSchema(t *testing.T) {
	for _, name := range fixtures.Names(t) {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(fixtures.Path(name))
			if err != nil {
				t.Fatal(err)
			}
			schematest.Validate(t, recordDoc.Name, b)
			var buf bytes.Buffer
			if err := record.Encode(&buf, fixtures.Record(t, name)); err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(plain, []byte(`"samples":[{"t":`)) {
				t.Fatalf("the encoded record has no samples to check")
			}
			schematest.Validate(t, recordDoc.Name, plain)
		})
	}
}
