package summary

import (
	"bytes"
	"testing"

	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// summaryDoc is `run --json`, `attach --json` and `report --json`.
var summaryDoc = schematest.Document{Name: "summary", ID: Schema, Type: Summary{}}

// TestJSONSchema holds docs/schemas/summary.schema.json to Summary.
func TestJSONSchema(t *testing.T) { schematest.Check(t, summaryDoc) }

// The summary of every recorded run, as Write streams it (by its own
// encoder, not encoding/json), and with each record as its own baseline,
// is valid under the schema.
func TestSummariesMatchTheSchema(t *testing.T) {
	for name, r := range fixtures.All(t) {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, r, nil); err != nil {
				t.Fatal(err)
			}
			schematest.Validate(t, summaryDoc.Name, b.Bytes())
			b.Reset()
			if err := WriteBaseline(&b, r, nil, r); err != nil {
				t.Fatal(err)
			}
			schematest.Validate(t, summaryDoc.Name, b.Bytes())
		})
	}
}
