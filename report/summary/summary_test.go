package summary

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/fixtures"
	"github.com/coldtrace/coldtrace/record"
)

func jitRecord() *record.Record {
	return &record.Record{JIT: &record.JIT{
		Caches: []record.Cache{
			{Name: "triton", Root: "/home/u/.triton/cache", Lookups: 3, Hits: 1, Misses: 2, EntriesWritten: 2,
				BytesWritten: 27043, CompileNS: 823e6, FS: "tmpfs", Volatile: true, SizeBytes: 54086, Files: 6},
		},
		Compilers: []record.Compiler{{Name: "cc", Runs: 1, WallNS: 822e6, CPUNS: 3e6}},
	}}
}

func TestSummaryJIT(t *testing.T) {
	b, _ := json.Marshal(New(jitRecord(), nil))
	var back struct {
		Caches    []map[string]any `json:"caches"`
		Compilers []map[string]any `json:"compilers"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "root", "lookups", "hits", "misses", "entries_written", "bytes_written", "compile_ns"} {
		if _, ok := back.Caches[0][k]; !ok {
			t.Errorf("caches[0] lacks %q", k)
		}
	}
	for _, k := range []string{"name", "runs", "wall_ns", "cpu_ns"} {
		if _, ok := back.Compilers[0][k]; !ok {
			t.Errorf("compilers[0] lacks %q", k)
		}
	}
	empty, _ := json.Marshal(New(&record.Record{}, nil))
	if !strings.Contains(string(empty), `"caches":[]`) || !strings.Contains(string(empty), `"compilers":[]`) {
		t.Errorf("empty caches or compilers are not []: %s", empty)
	}
}

// TestSummaryV1Keys: the verdict and notes stay strings where v1 has
// them, the attribution keeps its keys, and interrupted is always there.
func TestSummaryV1Keys(t *testing.T) {
	r := fixtures.Record(t, "sleep-read-spin")
	var b strings.Builder
	if err := Write(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Verdict     string `json:"verdict"`
		Interrupted *bool  `json:"interrupted"`
		Attribution struct {
			Verdict     string         `json:"verdict"`
			Notes       []string       `json:"notes"`
			Breakdown   []any          `json:"breakdown"`
			WallNS      int64          `json:"wall_ns"`
			VerdictData map[string]any `json:"verdict_data"`
		} `json:"attribution"`
	}
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatal(err)
	}
	const want = "cold start: 13% disk reads (data/big.bin not in page cache); a warm rerun should take ~3.0s."
	if doc.Verdict != want || doc.Attribution.Verdict != want {
		t.Errorf("verdicts %q, %q", doc.Verdict, doc.Attribution.Verdict)
	}
	if len(doc.Attribution.Notes) != 1 || !strings.Contains(doc.Attribution.Notes[0], "the last 30ms after the final sample") {
		t.Errorf("notes %q", doc.Attribution.Notes)
	}
	if len(doc.Attribution.Breakdown) != 6 || doc.Attribution.WallNS != r.WallNS || doc.Attribution.VerdictData["kind"] != "cold" {
		t.Errorf("attribution %+v", doc.Attribution)
	}
	if doc.Interrupted == nil || *doc.Interrupted {
		t.Errorf("interrupted = %v, want false and present", doc.Interrupted)
	}
	r.Interrupted = true
	if s := New(r, nil); !s.Interrupted {
		t.Error("an interrupted record's summary says interrupted false")
	}
}
