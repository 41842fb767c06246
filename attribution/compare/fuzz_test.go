package compare_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
	"github.com/coldtrace/coldtrace/report/diff"
	"github.com/coldtrace/coldtrace/report/words"
)

// FuzzCompare decodes two records and compares them, as `coldtrace diff`
// does: whatever two records decode, the comparison's category deltas sum
// to the wall difference, its verdict can be said, and both renderers
// write it. Seeds: pairs of the recorded runs under testdata/records, and
// the corpus in testdata/fuzz/FuzzCompare.
func FuzzCompare(f *testing.F) {
	names := fixtures.Names(f)
	data := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(fixtures.Path(n))
		if err != nil {
			f.Fatal(err)
		}
		data[n] = b
	}
	for i, a := range names {
		b := names[(i+1)%len(names)]
		f.Add(data[a], data[b])
		f.Add(data[a], data[a])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		const limit = 4 << 20
		ra, err := record.DecodeLimit(bytes.NewReader(a), limit)
		if err != nil {
			return
		}
		rb, err := record.DecodeLimit(bytes.NewReader(b), limit)
		if err != nil {
			return
		}
		d := compare.New(ra, rb, nil, nil)
		var sum int64
		for _, c := range d.Breakdown {
			sum += c.DeltaNS
		}
		if sum != d.DeltaNS {
			t.Fatalf("category deltas sum to %d, the wall difference is %d", sum, d.DeltaNS)
		}
		if words.Comparison(d.Verdict) == "" {
			t.Fatal("empty verdict")
		}
		if bytes.Equal(a, b) && (len(d.Warnings) == 0 || d.Verdict.Kind != compare.Same) {
			t.Fatalf("one record twice: verdict %q, warnings %q", d.Verdict.Kind, d.Warnings)
		}
		var out bytes.Buffer
		if err := diff.WriteText(&out, d, diff.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		if err := diff.WriteJSON(&out, d); err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out.Bytes()) {
			t.Fatal("diff JSON is not valid JSON")
		}
		// A record that keeps its invariants compared with itself
		// changes nothing.
		if invariants.Err(ra) == nil {
			self := compare.New(ra, ra, nil, nil)
			for _, c := range self.Breakdown {
				if c.DeltaNS != 0 {
					t.Fatalf("%s: delta %d comparing a record with itself", c.Category, c.DeltaNS)
				}
			}
		}
	})
}
