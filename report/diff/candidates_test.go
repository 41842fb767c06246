package diff

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record"
)

// TestDiffNamesDirectoriesBReadBack: a directory under the home that A
// filled with 2 MiB and B read back unchanged is named in the text (its
// control bytes escaped) and in cache_candidates[].
func TestDiffNamesDirectoriesBReadBack(t *testing.T) {
	dir := "/home/u/.cache/my\x1b[31mtool"
	a := &record.Record{Files: []record.File{{Path: dir + "/m/blob", PagesCreated: 512, PagesAccessed: 512}}}
	b := &record.Record{Files: []record.File{{Path: dir + "/m/blob", PagesAccessed: 512}}}
	for _, r := range []*record.Record{a, b} {
		r.User.Home, r.Host.PageSize = "/home/u", 4096
	}
	d := compare.New(a, b, nil, nil)
	var text bytes.Buffer
	if err := WriteText(&text, d, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	if !strings.Contains(out, "caches the registry does not know") || !strings.Contains(out, "created 2.0 MiB in 1 file there") {
		t.Errorf("text lacks the candidate section:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("text carries a raw escape byte:\n%q", out)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Candidates []struct {
			Dir          string `json:"dir"`
			CreatedBytes int64  `json:"created_bytes"`
			Reused       bool   `json:"reused"`
		} `json:"cache_candidates"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Candidates) != 1 || got.Candidates[0].Dir != dir+"/m" || got.Candidates[0].CreatedBytes != 2<<20 || !got.Candidates[0].Reused {
		t.Errorf("cache_candidates %+v, want %q of 2 MiB, reused", got.Candidates, dir+"/m")
	}
}
