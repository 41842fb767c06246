package summary

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// The run's labels survive the record's encoding and reach the summary.
func TestLabelsReachTheSummary(t *testing.T) {
	r := fixtures.Record(t, "cat-cold")
	r.Labels = map[string]string{"host": "node1", "rank": "3"}
	var enc strings.Builder
	if err := record.Encode(&enc, r); err != nil {
		t.Fatal(err)
	}
	back, err := record.Decode(strings.NewReader(enc.String()))
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	if err := Write(&buf, back, nil); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal([]byte(buf.String()), &s); err != nil {
		t.Fatal(err)
	}
	if s.Labels["host"] != "node1" || s.Labels["rank"] != "3" || len(s.Labels) != 2 {
		t.Errorf("summary labels %v", s.Labels)
	}
}
