package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/report/timeline"
)

// TestEverySchemaIDIsDistinct: each JSON document under docs/schemas
// names itself with an id no other document uses (the timeline, whose id
// sits in its otherData, included), so a reader can tell them apart by
// the id alone.
func TestEverySchemaIDIsDistinct(t *testing.T) {
	files, err := filepath.Glob("../../docs/schemas/*.schema.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d schema files (%v)", len(files), err)
	}
	seen := map[string]string{timeline.Schema: "timeline"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Title string `json:"title"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".schema.json")
		if name == "timeline" {
			continue // a Chrome trace file: its id is timeline.Schema, in otherData
		}
		if !strings.HasPrefix(s.Title, "coldtrace.") || !strings.Contains(s.Title, "/v") {
			t.Errorf("%s: title %q is not a schema id", name, s.Title)
			continue
		}
		if other, dup := seen[s.Title]; dup {
			t.Errorf("%s and %s both claim %s", other, name, s.Title)
		}
		seen[s.Title] = name
	}
}
