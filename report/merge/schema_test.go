package merge

import (
	"bytes"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/merge"
	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// mergeDoc is `coldtrace merge --json`.
var mergeDoc = schematest.Document{Name: "merge", ID: Schema, Type: document{}}

// TestJSONSchema holds docs/schemas/merge.schema.json to the document type.
func TestJSONSchema(t *testing.T) { schematest.Check(t, mergeDoc) }

// A merge of four ranks, and one of every recorded run, are valid under
// the schema.
func TestMergesMatchTheSchema(t *testing.T) {
	var in []merge.Input
	for _, name := range fixtures.Names(t) {
		in = append(in, merge.Input{Source: name, Record: fixtures.Record(t, name)})
	}
	every, err := merge.Merge(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []*merge.Job{job(t), every} {
		var b bytes.Buffer
		if err := WriteJSON(&b, j); err != nil {
			t.Fatal(err)
		}
		schematest.Validate(t, mergeDoc.Name, b.Bytes())
	}
}
