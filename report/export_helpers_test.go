package report

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// fixtureRecords are the recorded runs under testdata/records.
func exportFixtures(t *testing.T) map[string]*record.Record {
	t.Helper()
	paths, err := filepath.Glob("../testdata/records/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no record fixtures: %v", err)
	}
	out := map[string]*record.Record{}
	for _, p := range paths {
		r, err := record.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = r
	}
	return out
}

func exportFixture(t *testing.T, name string) (*record.Record, *attribution.Result) {
	t.Helper()
	r, err := record.ReadFile("../testdata/records/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	return r, attribution.Analyze(r)
}
