package timeline

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// TestOtherDataNamesTheTimelineAndTheRecord: otherData's "schema" is the
// timeline's own id; the record's stands beside it as "record_schema".
func TestOtherDataNamesTheTimelineAndTheRecord(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, fixtures.Record(t, "cat-cold"), nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OtherData map[string]string `json:"otherData"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OtherData["schema"] != Schema || doc.OtherData["record_schema"] != record.Schema || Schema == record.Schema {
		t.Errorf("otherData schema %q, record_schema %q", doc.OtherData["schema"], doc.OtherData["record_schema"])
	}
}
