package merge

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/merge"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

func job(t *testing.T) *merge.Job {
	t.Helper()
	var in []merge.Input
	for _, rank := range []string{"0", "1", "2", "3"} {
		name := "truth-warm"
		if rank == "3" {
			name = "truth-cold"
		}
		r := fixtures.Record(t, name)
		r.Labels = map[string]string{"rank": rank}
		in = append(in, merge.Input{Source: name, Record: r})
	}
	j, err := merge.Merge(in)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestSentenceNamesRankAndCause(t *testing.T) {
	s := Sentence(job(t))
	want := "rank 3 was 3.3s slower than the median rank (rank 1, 2.2s): 1.8s more disk reads — its node did not have /home/dev/truth/data/model.bin cached"
	if !strings.HasPrefix(s, want) {
		t.Errorf("sentence\n%s\nwant it to start\n%s", s, want)
	}
}

func TestTextAndJSON(t *testing.T) {
	j := job(t)
	var b bytes.Buffer
	if err := WriteText(&b, j); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{"4 records of sh truth.sh", "*  rank 3", "disk reads", "not in the page cache: /home/dev/truth/data/model.bin (1.8s) — rank 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	b.Reset()
	if err := WriteJSON(&b, j); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema  string `json:"schema"`
		Summary string `json:"summary"`
		Verdict string `json:"verdict"`
		Slowest int    `json:"slowest"`
		Ranks   []struct {
			Name      string `json:"name"`
			Breakdown []struct {
				Category string `json:"category"`
				NS       int64  `json:"ns"`
			} `json:"breakdown"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != Schema || doc.Ranks[doc.Slowest].Name != "rank 3" || len(doc.Ranks[0].Breakdown) != 6 || doc.Summary != Sentence(j) || doc.Verdict != doc.Summary {
		t.Errorf("JSON %+v", doc)
	}
}
