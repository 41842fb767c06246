package segments

import (
	"bytes"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// segmentsDoc is `report --segments --json`.
var segmentsDoc = schematest.Document{Name: "segments", ID: Schema, Type: document{}}

// TestJSONSchema holds docs/schemas/segments.schema.json to the document
// type.
func TestJSONSchema(t *testing.T) { schematest.Check(t, segmentsDoc) }

// The segments of a marked run and of every recorded run are valid under
// the schema.
func TestSegmentsMatchTheSchema(t *testing.T) {
	recs := fixtures.All(t)
	recs["marked"] = marked()
	for name, r := range recs {
		segs := attribution.Options{}.AnalyzeSegments(r, attribution.Segments(r, attribution.SegmentOptions{}))
		var b bytes.Buffer
		if err := WriteJSON(&b, segs); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) { schematest.Validate(t, segmentsDoc.Name, b.Bytes()) })
	}
}
