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
//
// Each also says its one-line answer under verdict, but for the record
// (the data every other document answers from) and the timeline (Chrome's
// trace-event format, read by Perfetto).
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
			Title      string                     `json:"title"`
			Ref        string                     `json:"$ref"`
			Properties map[string]json.RawMessage `json:"properties"`
			Defs       map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"$defs"`
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
		props := s.Properties
		if def, ok := s.Defs[strings.TrimPrefix(s.Ref, "#/$defs/")]; ok && s.Ref != "" {
			props = def.Properties
		}
		if _, ok := props["verdict"]; !ok && !noVerdict[name] {
			t.Errorf("%s has no verdict: every document says its one-line answer under verdict", name)
		}
		if other, dup := seen[s.Title]; dup {
			t.Errorf("%s and %s both claim %s", other, name, s.Title)
		}
		seen[s.Title] = name
	}
}

// noVerdict are the documents without a one-line answer of their own.
var noVerdict = map[string]bool{"record": true, "timeline": true}
