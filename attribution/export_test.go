package attribution

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// WordedCase is an analyze case's record with the verdict and note
// substrings it must produce in words, for words_test.go (package
// attribution_test), which can import report/words.
type WordedCase struct {
	Name    string
	Record  func(t *testing.T) *record.Record
	Verdict []string
	Notes   []string
}

// WordedCases lists the analyze cases that state words.
func WordedCases() []WordedCase {
	var out []WordedCase
	for _, tc := range analyzeCases {
		if len(tc.verdict) > 0 || len(tc.notes) > 0 {
			out = append(out, WordedCase{Name: tc.name, Record: tc.record, Verdict: tc.verdict, Notes: tc.notes})
		}
	}
	return out
}
