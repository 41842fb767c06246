package diff

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record/fixtures"
	"github.com/coldtrace/coldtrace/report/summary"
	"github.com/coldtrace/coldtrace/report/text"
)

// TestTextJSONAndDiffSayTheSameLabel: the run's label ("cold (read … from
// disk in …)") comes from one function and reads the same in the text
// report, the JSON verdict and both sides of a diff.
func TestTextJSONAndDiffSayTheSameLabel(t *testing.T) {
	a := fixtures.Record(t, "truth-cold")
	b := fixtures.Record(t, "truth-warm")
	la, lb := attribution.Analyze(a).Verdict.Label, attribution.Analyze(b).Verdict.Label
	if !strings.HasPrefix(la, "cold (read ") || lb != "warm" {
		t.Fatalf("labels %q, %q", la, lb)
	}
	var tx strings.Builder
	if err := text.Write(&tx, a, nil, text.Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tx.String(), "\n  state: "+la+"\n") {
		t.Errorf("text report lacks state %q:\n%s", la, tx.String())
	}
	d := compare.New(a, b, nil, nil)
	var dt, dj bytes.Buffer
	if err := WriteText(&dt, d, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dt.String(), ", "+la) || !strings.Contains(dt.String(), ", "+lb) {
		t.Errorf("diff text lacks %q or %q:\n%s", la, lb, dt.String())
	}
	if err := WriteJSON(&dj, d); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		A struct {
			Label string `json:"label"`
		} `json:"a"`
	}
	if err := json.Unmarshal(dj.Bytes(), &doc); err != nil || doc.A.Label != la {
		t.Errorf("diff JSON a.label %q (%v), want %q", doc.A.Label, err, la)
	}
	var sum bytes.Buffer
	if err := summary.Write(&sum, a, attribution.Analyze(a)); err != nil {
		t.Fatal(err)
	}
	var sdoc struct {
		Label string `json:"label"`
	}
	if err := json.Unmarshal(sum.Bytes(), &sdoc); err != nil || sdoc.Label != la {
		t.Errorf("summary JSON label %q (%v), want %q", sdoc.Label, err, la)
	}
}
