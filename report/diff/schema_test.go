package diff

import (
	"bytes"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// diffDoc is `coldtrace diff --json`.
var diffDoc = schematest.Document{Name: "diff", ID: Schema, Type: document{}}

// TestJSONSchema holds docs/schemas/diff.schema.json to the document type.
func TestJSONSchema(t *testing.T) { schematest.Check(t, diffDoc) }

// The diff of every pair of recorded runs, both ways, is valid under the
// schema.
func TestDiffsMatchTheSchema(t *testing.T) {
	all := fixtures.All(t)
	for an, a := range all {
		for bn, b := range all {
			var buf bytes.Buffer
			if err := WriteJSON(&buf, compare.New(a, b, nil, nil)); err != nil {
				t.Fatal(err)
			}
			t.Run(an+"/"+bn, func(t *testing.T) { schematest.Validate(t, diffDoc.Name, buf.Bytes()) })
		}
	}
}
