package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

func TestDiffColdWarm(t *testing.T) {
	a, ra := exportFixture(t, "truth-cold")
	b, rb := exportFixture(t, "truth-warm")
	d := NewDiff(a, b, ra, rb)

	if d.Schema != DiffSchema || d.A.WallNS != a.WallNS || d.B.WallNS != b.WallNS || d.DeltaNS != b.WallNS-a.WallNS {
		t.Fatalf("header: schema %q, walls %d %d, delta %d", d.Schema, d.A.WallNS, d.B.WallNS, d.DeltaNS)
	}
	if !d.A.Cold || d.B.Cold {
		t.Errorf("cold flags A=%v B=%v, want A cold and B warm", d.A.Cold, d.B.Cold)
	}
	var sum int64
	for _, c := range d.Breakdown {
		sum += c.DeltaNS
		if c.DeltaNS != c.BNS-c.ANS {
			t.Errorf("%s: delta %d != %d - %d", c.Category, c.DeltaNS, c.BNS, c.ANS)
		}
	}
	if math.Abs(float64(sum-d.DeltaNS)) > 0.01*math.Abs(float64(d.DeltaNS)) {
		t.Errorf("category deltas sum to %d, wall difference is %d", sum, d.DeltaNS)
	}
	for _, c := range d.Breakdown {
		if c.Category == attribution.DiskRead && c.DeltaNS >= 0 {
			t.Errorf("disk_read delta %d, want a saving", c.DeltaNS)
		}
		if c.Category == attribution.JITCompile && c.DeltaNS >= 0 {
			t.Errorf("jit_compile delta %d, want a saving", c.DeltaNS)
		}
	}

	const model = "/home/dev/truth/data/model.bin"
	if len(d.Files) == 0 || d.Files[0].Path != model {
		t.Fatalf("files %+v, want %s first", d.Files, model)
	}
	if f := d.Files[0]; f.Change != FileCached || f.APagesMissed == 0 || f.BPagesMissed != 0 || f.ADiskNS == 0 || f.BDiskNS != 0 {
		t.Errorf("model file %+v, want missed in A and cached in B", f)
	}
	for _, f := range d.Files[1:] {
		if strings.Contains(f.Path, "libc") && f.Change != FileCachedInBoth {
			t.Errorf("libc: %q, want %q", f.Change, FileCachedInBoth)
		}
	}
	if len(d.Caches) != 1 || d.Caches[0].Name != "triton" || d.Caches[0].AMisses != 12 || d.Caches[0].BHits != 12 || d.Caches[0].BecameHits != 12 {
		t.Errorf("caches %+v, want triton with 12 misses that became hits", d.Caches)
	}
	if len(d.Compilers) == 0 || d.Compilers[0].Name != "ptxas" || d.Compilers[0].ARuns != 3 || d.Compilers[0].BRuns != 0 {
		t.Errorf("compilers %+v, want ptxas 3 runs → 0", d.Compilers)
	}
	if len(d.Warnings) != 0 {
		t.Errorf("warnings for a clean pair: %v", d.Warnings)
	}
	for _, want := range []string{"B was 3.3s faster", "less disk reads (" + model + " was cached)", "less JIT compile (12 triton kernels were cache hits)"} {
		if !strings.Contains(d.Verdict, want) {
			t.Errorf("verdict %q lacks %q", d.Verdict, want)
		}
	}
}

// TestDiffJSONSchema checks the keys scripts rely on.
func TestDiffJSONSchema(t *testing.T) {
	a, _ := exportFixture(t, "truth-cold")
	b, _ := exportFixture(t, "truth-warm")
	var buf bytes.Buffer
	if err := WriteDiffJSON(&buf, NewDiff(a, b, nil, nil)); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != "coldtrace.diff/v1" {
		t.Errorf("schema %v", doc["schema"])
	}
	if v, ok := doc["verdict"].(string); !ok || v == "" {
		t.Errorf("verdict %v", doc["verdict"])
	}
	for _, side := range []string{"a", "b"} {
		m, _ := doc[side].(map[string]any)
		if _, ok := m["wall_ns"].(float64); !ok {
			t.Errorf("%s.wall_ns missing: %v", side, m)
		}
	}
	need := map[string][]string{
		"breakdown": {"category", "a_ns", "b_ns", "delta_ns"},
		"files":     {"path", "a_pages_missed", "b_pages_missed", "a_bytes_from_disk", "b_bytes_from_disk", "a_disk_ns", "b_disk_ns", "change"},
		"caches":    {"name", "a_misses", "b_misses", "a_hits", "b_hits", "became_hits"},
		"compilers": {"name", "a_runs", "b_runs"},
	}
	for list, keys := range need {
		items, ok := doc[list].([]any)
		if !ok || len(items) == 0 {
			t.Errorf("%s: %v", list, doc[list])
			continue
		}
		for _, it := range items {
			m := it.(map[string]any)
			for _, k := range keys {
				if _, ok := m[k]; !ok {
					t.Errorf("%s entry without %q: %v", list, k, m)
				}
			}
		}
	}
	if _, ok := doc["gpus"].([]any); !ok {
		t.Errorf("gpus is not a list: %v", doc["gpus"])
	}
}

func TestDiffReversed(t *testing.T) {
	a, _ := exportFixture(t, "truth-warm")
	b, _ := exportFixture(t, "truth-cold")
	d := NewDiff(a, b, nil, nil)
	for _, want := range []string{"B was 3.3s slower", "more disk reads (/home/dev/truth/data/model.bin was not cached)", "more JIT compile (12 more triton cache misses)"} {
		if !strings.Contains(d.Verdict, want) {
			t.Errorf("verdict %q lacks %q", d.Verdict, want)
		}
	}
	if d.Files[0].Change != FileUncached {
		t.Errorf("model file %q, want %q", d.Files[0].Change, FileUncached)
	}
	if !strings.Contains(strings.Join(d.Warnings, "\n"), "recorded before A") {
		t.Errorf("no warning about the order: %v", d.Warnings)
	}
}

func TestDiffSameRun(t *testing.T) {
	a, _ := exportFixture(t, "cold-ml")
	d := NewDiff(a, a, nil, nil)
	if !strings.HasPrefix(d.Verdict, "A and B took about as long") {
		t.Errorf("verdict %q", d.Verdict)
	}
	for _, c := range d.Breakdown {
		if c.DeltaNS != 0 {
			t.Errorf("%s: delta %d comparing a run with itself", c.Category, c.DeltaNS)
		}
	}
	for _, f := range d.Files {
		if f.Change != FileMissedInBoth {
			t.Errorf("%s: %q", f.Path, f.Change)
		}
	}
}

func TestDiffWarnsAcrossHostsAndCommands(t *testing.T) {
	a, _ := exportFixture(t, "truth-cold")
	b, _ := exportFixture(t, "truth-warm")
	b.Host.Hostname = "other-box"
	b.Command = []string{"sh", "other.sh"}
	b.Lost.RingBuffer = 3
	d := NewDiff(a, b, nil, nil)
	all := strings.Join(d.Warnings, "\n")
	for _, want := range []string{"different hosts (fixture, other-box)", "different commands", "B lost 3 events"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", all, want)
		}
	}
	var buf bytes.Buffer
	if err := WriteDiffText(&buf, d, DiffTextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "warning: A and B come from different hosts") {
		t.Errorf("text lacks the host warning:\n%s", buf.String())
	}
}

// TestDiffDeltasSum compares every pair of fixtures: each breakdown sums
// to its wall time, so the deltas sum to the wall difference.
func TestDiffDeltasSum(t *testing.T) {
	recs := exportFixtures(t)
	for an, a := range recs {
		for bn, b := range recs {
			d := NewDiff(a, b, nil, nil)
			var sum int64
			for _, c := range d.Breakdown {
				sum += c.DeltaNS
			}
			if sum != d.DeltaNS {
				t.Errorf("%s vs %s: deltas sum to %d, wall difference %d", an, bn, sum, d.DeltaNS)
			}
			if d.Verdict == "" {
				t.Errorf("%s vs %s: no verdict", an, bn)
			}
		}
	}
}

func TestDiffText(t *testing.T) {
	a, _ := exportFixture(t, "cold-ml")
	b, _ := exportFixture(t, "truth-warm")
	var buf bytes.Buffer
	d := NewDiff(a, b, nil, nil)
	if err := WriteDiffText(&buf, d, DiffTextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"coldtrace diff", "A: python3 generate.py", "B: sh truth.sh", "disk reads", "JIT compile",
		"GPU compute", "other wait", "wall", "files (A → B)", "qwen_image_fp8.safetensors", "caches (A → B)", "triton",
		"compilers (A → B)", "ptxas", "GPUs (A → B)", "NVIDIA H200", "verdict: " + d.Verdict} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestDiffEmptyRecords(t *testing.T) {
	d := NewDiff(&record.Record{}, &record.Record{}, nil, nil)
	if d.Verdict == "" || d.Files == nil || d.Caches == nil || d.GPUs == nil {
		t.Errorf("empty diff %+v", d)
	}
	var buf bytes.Buffer
	if err := WriteDiffText(&buf, d, DiffTextOptions{}); err != nil {
		t.Fatal(err)
	}
}
