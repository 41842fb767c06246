package summary

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
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

// TestSummaryPartial: a checkpoint's summary says it is partial, and a
// finished run's has no partial key.
func TestSummaryPartial(t *testing.T) {
	r := fixtures.Record(t, "sleep-read-spin")
	var b strings.Builder
	if err := Write(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"partial"`) {
		t.Errorf("a finished run's summary has a partial key")
	}
	r.Partial = &record.Partial{AtNS: 5e9, Reason: "checkpoint"}
	b.Reset()
	if err := Write(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Partial *record.Partial `json:"partial"`
	}
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Partial == nil || doc.Partial.AtNS != 5e9 || doc.Partial.Reason != "checkpoint" {
		t.Errorf("partial = %+v", doc.Partial)
	}
}

// TestSummaryCoarsened: the JSON says from when a long run's timeline
// sums several polls a sample, and has no key when it does not.
func TestSummaryCoarsened(t *testing.T) {
	r := fixtures.Record(t, "sleep-read-spin")
	var b strings.Builder
	if err := Write(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"coarsened"`) {
		t.Errorf("a fine timeline's summary has a coarsened key")
	}
	r.Coarsened = &record.Coarsening{FromNS: 6e11, PollsPerSample: 4, Polls: 9000}
	b.Reset()
	if err := Write(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Coarsened *record.Coarsening `json:"coarsened"`
	}
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Coarsened == nil || *doc.Coarsened != *r.Coarsened {
		t.Errorf("coarsened = %+v, want %+v", doc.Coarsened, r.Coarsened)
	}
}

func TestSummaryMadeCold(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	var b strings.Builder
	if err := Write(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatal(err)
	}
	if v, ok := doc["made_cold"]; !ok || v != nil {
		t.Errorf("plain run: made_cold = %v (present %v), want null", v, ok)
	}
	r.MadeCold = &record.MadeCold{Classes: []string{"jit"}, CacheDirs: []record.ColdCacheDir{{Cache: "triton", Env: "TRITON_CACHE_DIR", Dir: "/d"}}}
	b.Reset()
	if err := Write(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	var cold struct {
		MadeCold *record.MadeCold `json:"made_cold"`
	}
	if err := json.Unmarshal([]byte(b.String()), &cold); err != nil {
		t.Fatal(err)
	}
	if cold.MadeCold == nil || cold.MadeCold.Classes[0] != "jit" || cold.MadeCold.CacheDirs[0].Env != "TRITON_CACHE_DIR" {
		t.Errorf("made_cold = %+v", cold.MadeCold)
	}
}

// TestSummaryDownloads: downloads[] carries each fetch with its fate, and
// is [] when there were none.
func TestSummaryDownloads(t *testing.T) {
	b, _ := json.Marshal(New(fixtures.Record(t, "cold-ml"), nil))
	var doc struct {
		Downloads []map[string]any `json:"downloads"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Downloads) != 1 {
		t.Fatalf("downloads = %v", doc.Downloads)
	}
	d := doc.Downloads[0]
	for k, v := range map[string]any{"name": "transformer/diffusion_pytorch_model.safetensors", "cache": "huggingface",
		"bytes": float64(300 << 20), "peer": "18.65.25.3:443", "host": "huggingface.co", "fate": "kept", "start_ns": 0.0, "end_ns": 5e8} {
		if d[k] != v {
			t.Errorf("downloads[0].%s = %v, want %v", k, d[k], v)
		}
	}
	if rate, _ := d["mb_per_s"].(float64); rate < 629 || rate > 630 {
		t.Errorf("mb_per_s = %v", d["mb_per_s"])
	}
	empty, _ := json.Marshal(New(&record.Record{}, nil))
	if !strings.Contains(string(empty), `"downloads":[]`) {
		t.Errorf("no downloads is not []: %s", empty)
	}
}

// TestSummaryHubHealth: the hub cache's offline switch, container layer
// and notes reach the JSON.
func TestSummaryHubHealth(t *testing.T) {
	r := &record.Record{JIT: &record.JIT{Caches: []record.Cache{
		{Name: "huggingface", Root: "/data/hf/hub", Hits: 1, FS: "overlay", ContainerLayer: true, Offline: "HF_HUB_OFFLINE=1",
			Notes: []string{"HF_HUB_OFFLINE=1: offline: a rerun cannot download, so a file missing from the cache fails the run"}},
	}}}
	b, _ := json.Marshal(New(r, nil))
	var back struct {
		Caches []record.Cache `json:"caches"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if c := back.Caches[0]; c.Offline != "HF_HUB_OFFLINE=1" || !c.ContainerLayer || len(c.Notes) != 1 {
		t.Errorf("caches[0] %+v from %s", c, b)
	}
	for _, k := range []string{`"offline":"HF_HUB_OFFLINE=1"`, `"container_layer":true`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

// The streamed summary is what encoding/json's indenting encoder writes,
// byte for byte, for every recorded run (a baseline included).
func TestWriteIsEncodingJSON(t *testing.T) {
	all := fixtures.All(t)
	for name, r := range all {
		for _, base := range []*record.Record{nil, all["truth-warm"]} {
			res := attribution.Analyze(r)
			var got, want bytes.Buffer
			if err := WriteBaseline(&got, r, res, base); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			if err := enc.Encode(NewBaseline(r, res, base)); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("%s (baseline %v): the streamed summary differs from encoding/json's (%d and %d bytes)",
					name, base != nil, got.Len(), want.Len())
			}
		}
	}
}
