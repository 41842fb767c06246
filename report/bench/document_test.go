package bench

import (
	"encoding/json"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/abtest"
)

// TestBenchJSONSaysVerdictUnderBothNames: v2 puts the one-line answer
// under "verdict" and keeps v1's "verdict_text" beside it for a release.
func TestBenchJSONSaysVerdictUnderBothNames(t *testing.T) {
	b, err := json.Marshal(NewDocument(&abtest.Report{}))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema      string `json:"schema"`
		Verdict     string `json:"verdict"`
		VerdictText string `json:"verdict_text"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != "coldtrace.bench/v2" || doc.Verdict == "" || doc.Verdict != doc.VerdictText {
		t.Errorf("schema %q, verdict %q, verdict_text %q", doc.Schema, doc.Verdict, doc.VerdictText)
	}
}
