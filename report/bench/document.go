package bench

import "github.com/coldtrace/coldtrace/attribution/abtest"

// Schema names `coldtrace bench --json`; v2 added "verdict".
const Schema = "coldtrace.bench/v2"

// Document is the --json document.
type Document struct {
	Schema string         `json:"schema"`
	A      abtest.Command `json:"a"`
	B      abtest.Command `json:"b"`
	Order  string         `json:"order"`
	Report *abtest.Report `json:"bench"`
	// Verdict is the summary's verdict in words, the one-line answer
	// every document has under "verdict".
	Verdict string `json:"verdict"`
	// VerdictText is Verdict under its v1 name, written for one more
	// release (deprecated).
	VerdictText string `json:"verdict_text"`
}

// NewDocument is rep as the --json document.
func NewDocument(rep *abtest.Report) Document {
	order := "alternate"
	if rep.Plan.Shuffle {
		order = "shuffle"
	}
	verdict := Verdict(rep.Summary)
	return Document{Schema: Schema, A: rep.Plan.A, B: rep.Plan.B, Order: order,
		Report: rep, Verdict: verdict, VerdictText: verdict}
}
