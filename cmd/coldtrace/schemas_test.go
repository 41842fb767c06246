package main

import (
	"testing"

	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/report/bench"
	"github.com/coldtrace/coldtrace/report/status"
)

// The JSON documents whose types live in this package, each with its own
// schema id (prefetch's run and its --dry-run plan apart).
var (
	docStatus       = schematest.Document{Name: "status", ID: status.Schema, Type: status.Report{}}
	docBench        = schematest.Document{Name: "bench", ID: bench.Schema, Type: bench.Document{}}
	docEvict        = schematest.Document{Name: "evict", ID: status.EvictSchema, Type: status.EvictDocument{}}
	docPrefetch     = schematest.Document{Name: "prefetch", ID: status.PrefetchSchema, Type: status.PrefetchDocument{}}
	docPrefetchPlan = schematest.Document{Name: "prefetch-plan", ID: status.PrefetchPlanSchema, Type: status.PrefetchPlanDocument{}}
)

// TestJSONSchema holds the schemas of this package's documents under
// docs/schemas to their types.
func TestJSONSchema(t *testing.T) {
	schematest.Check(t, docStatus, docBench, docEvict, docPrefetch, docPrefetchPlan)
}
