package diff

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
	"github.com/coldtrace/coldtrace/report/words"
)

// TestDiffJSONSchema checks the keys scripts rely on.
func TestDiffJSONSchema(t *testing.T) {
	a := fixtures.Record(t, "truth-cold")
	b := fixtures.Record(t, "truth-warm")
	var buf bytes.Buffer
	if err := WriteJSON(&buf, compare.New(a, b, nil, nil)); err != nil {
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

func TestDiffText(t *testing.T) {
	a := fixtures.Record(t, "cold-ml")
	b := fixtures.Record(t, "truth-warm")
	var buf bytes.Buffer
	d := compare.New(a, b, nil, nil)
	if err := WriteText(&buf, d, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"coldtrace diff", "A: python3 generate.py", "B: sh truth.sh", "disk reads", "JIT compile",
		"GPU compute", "other wait", "wall", "files (A → B)", "qwen_image_fp8.safetensors", "caches (A → B)", "triton",
		"compilers (A → B)", "ptxas", "GPUs (A → B)", "NVIDIA H200", "verdict: " + words.Comparison(d.Verdict)} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestDiffEmptyRecords(t *testing.T) {
	d := compare.New(&record.Record{}, &record.Record{}, nil, nil)
	if words.Comparison(d.Verdict) == "" || d.Files == nil || d.Caches == nil || d.GPUs == nil {
		t.Errorf("empty diff %+v", d)
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, d, TextOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestDiffWarnsAcrossHostsAndCommands(t *testing.T) {
	a := fixtures.Record(t, "truth-cold")
	b := fixtures.Record(t, "truth-warm")
	b.Host.Hostname = "other-box"
	b.Command = []string{"sh", "other.sh"}
	b.Lost.RingBuffer = 3
	d := compare.New(a, b, nil, nil)
	all := strings.Join(d.Warnings, "\n")
	for _, want := range []string{"different hosts (fixture, other-box)", "different commands", "B lost 3 events"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", all, want)
		}
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, d, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "warning: A and B come from different hosts") {
		t.Errorf("text lacks the host warning:\n%s", buf.String())
	}
}

// Two runs whose fills ended differently measure a read's CPU differently:
// the diff says so, and says nothing when either record predates the field.
func TestDiffWarnsWhenFillsEndedDifferently(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{record.FillEndTaskWork, record.FillEndReadExit, true},
		{record.FillEndReadExit, record.FillEndNextLook, true},
		{record.FillEndReadExit, record.FillEndReadExit, false},
		{"", record.FillEndNextLook, false},
	} {
		a := fixtures.Record(t, "truth-cold")
		b := fixtures.Record(t, "truth-warm")
		a.FillEnd, b.FillEnd = c.a, c.b
		d := compare.New(a, b, nil, nil)
		all := strings.Join(d.Warnings, "\n")
		if got := strings.Contains(all, "ended fills differently"); got != c.want {
			t.Errorf("%q vs %q: warned %v, want %v: %q", c.a, c.b, got, c.want, all)
		}
	}
	a := fixtures.Record(t, "truth-cold")
	b := fixtures.Record(t, "truth-warm")
	a.FillEnd, b.FillEnd = record.FillEndTaskWork, record.FillEndNextLook
	var buf bytes.Buffer
	if err := WriteText(&buf, compare.New(a, b, nil, nil), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "warning: A and B ended fills differently (at the return to user space, at the next look at the thread, without the read exits)"; !strings.Contains(buf.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, buf.String())
	}
}

// TestDiffDeltasSum compares every pair of fixtures: each breakdown sums
// to its wall time, so the deltas sum to the wall difference.

// TestTextEscapesProgramStrings: paths and commands of the traced program
// reach the terminal escaped, in the tables, the verdict and the warnings.
func TestTextEscapesProgramStrings(t *testing.T) {
	a := fixtures.Record(t, "truth-cold")
	b := fixtures.Record(t, "truth-warm")
	evil := "/data/\x1b[31mred\nverdict: fake\xff.bin"
	a.Files[0].Path, b.Files[0].Path = evil, evil
	a.Command = []string{"sh", "\x1b]0;title\x07"}
	var buf bytes.Buffer
	if err := WriteText(&buf, compare.New(a, b, nil, nil), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\nverdict: fake") || strings.Contains(out, "\xff") {
		t.Errorf("raw program strings in the diff:\n%q", out)
	}
	for _, want := range []string{`red\nverdict: fake\xff.bin was cached`, `\x1b[31mred`, `sh \x1b]0;title\x07`} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks the escaped %s:\n%s", want, out)
		}
	}
}

// TestDiffSaysMadeCold: the diff says which side was made cold on
// purpose, and warns when it is B.
func TestDiffSaysMadeCold(t *testing.T) {
	a := fixtures.Record(t, "truth-cold")
	b := fixtures.Record(t, "truth-warm")
	a.MadeCold = &record.MadeCold{Classes: []string{"page-cache", "jit"}, EvictedFiles: 1, EvictedBytes: 4096}
	d := compare.New(a, b, nil, nil)
	var buf bytes.Buffer
	if err := WriteText(&buf, d, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "\n     made cold on purpose (--cold=page-cache,jit): 1 file evicted") {
		t.Errorf("text does not say A was made cold:\n%s", out)
	}
	if strings.Contains(strings.Join(d.Warnings, "\n"), "--cold") {
		t.Errorf("a cold A warns: %q", d.Warnings)
	}
	buf.Reset()
	if err := WriteJSON(&buf, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"made_cold"`) {
		t.Errorf("JSON lacks made_cold:\n%s", buf.String())
	}
	d = compare.New(b, a, nil, nil)
	if !strings.Contains(strings.Join(d.Warnings, "\n"), "B was made cold on purpose (--cold) and A was not") {
		t.Errorf("B cold, A not: warnings %q", d.Warnings)
	}
}

// TestDiffSaysTheMachine: a thrashing, contended run against a plain one.
func TestDiffSaysTheMachine(t *testing.T) {
	d := compare.New(fixtures.Record(t, "cat-thrash"), fixtures.Record(t, "cat-cold"), nil, nil)
	var text, js bytes.Buffer
	if err := WriteText(&text, d, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	if want := "under its memory cgroup limit of 32.0 MiB; B once."; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}
	var doc struct {
		Machine []compare.MachineChange `json:"machine"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Machine) != 2 || doc.Machine[0].Kind != compare.MachineReread || doc.Machine[0].Side != "A" || doc.Machine[1].Kind != compare.MachineContention {
		t.Errorf("JSON machine %+v", doc.Machine)
	}
}
