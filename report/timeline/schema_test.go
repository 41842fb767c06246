package timeline

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/invopop/jsonschema"

	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// timelineDoc is the Chrome trace-event file of --timeline and
// `report --format perfetto`; it carries no schema id of its own.
var timelineDoc = schematest.Document{Name: "timeline", Type: document{}, Mapper: timelineTypes}

// timelineTypes describes micros, which MarshalJSON writes as a decimal
// number of microseconds, not the integer its kind says.
func timelineTypes(t reflect.Type) *jsonschema.Schema {
	if t == reflect.TypeFor[micros]() {
		return &jsonschema.Schema{Type: "number", Description: "microseconds, three decimals"}
	}
	return nil
}

// TestJSONSchema holds docs/schemas/timeline.schema.json to the document
// type.
func TestJSONSchema(t *testing.T) { schematest.Check(t, timelineDoc) }

// The timeline of every recorded run is valid under the schema.
func TestTimelinesMatchTheSchema(t *testing.T) {
	for name, r := range fixtures.All(t) {
		var b bytes.Buffer
		if err := Write(&b, r, nil); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) { schematest.Validate(t, timelineDoc.Name, b.Bytes()) })
	}
}
