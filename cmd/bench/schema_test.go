package main

import (
	"testing"

	"github.com/coldtrace/coldtrace/internal/schematest"
)

// docOverhead is the harness's -json results (make bench). Its schema id
// is the one `coldtrace bench --json` carries too.
var docOverhead = schematest.Document{Name: "overhead", ID: overheadSchema, Type: results{}}

// TestJSONSchema holds docs/schemas/overhead.schema.json to results.
func TestJSONSchema(t *testing.T) { schematest.Check(t, docOverhead) }
