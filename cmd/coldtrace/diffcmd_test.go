package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiffCommand(t *testing.T) {
	cold, warm := filepath.Join(recordFixtureDir, "truth-cold.json"), filepath.Join(recordFixtureDir, "truth-warm.json")

	var out, errb bytes.Buffer
	if code := diffCommand([]string{cold, warm}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"coldtrace diff", "disk reads", "verdict: B was 3.3s faster", "model.bin was cached"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text diff lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	errb.Reset()
	if code := diffCommand([]string{"--json", cold, warm}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var doc struct {
		Schema string `json:"schema"`
		A, B   struct {
			WallNS int64 `json:"wall_ns"`
		}
		Breakdown []struct {
			DeltaNS int64 `json:"delta_ns"`
		}
		Files []struct {
			Path         string `json:"path"`
			APagesMissed uint64 `json:"a_pages_missed"`
			BPagesMissed uint64 `json:"b_pages_missed"`
		}
		Verdict string
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	var sum int64
	for _, c := range doc.Breakdown {
		sum += c.DeltaNS
	}
	if doc.Schema != "coldtrace.diff/v1" || sum != doc.B.WallNS-doc.A.WallNS || len(doc.Files) == 0 ||
		doc.Files[0].APagesMissed == 0 || doc.Files[0].BPagesMissed != 0 || !strings.Contains(doc.Verdict, "model.bin") {
		t.Errorf("--json: %+v", doc)
	}

	// -o writes the file; warnings go to stderr.
	path := filepath.Join(t.TempDir(), "diff.json")
	out.Reset()
	errb.Reset()
	if code := diffCommand([]string{"--json", "-o", path, filepath.Join(recordFixtureDir, "cold-ml.json"), warm}, &out, &errb); code != 0 {
		t.Fatalf("-o: exit %d: %s", code, errb.String())
	}
	if data, err := os.ReadFile(path); err != nil || !bytes.Contains(data, []byte(`"coldtrace.diff/v1"`)) {
		t.Errorf("-o file: %v %s", err, data)
	}
	if !strings.Contains(errb.String(), "warning: A and B ran different commands") {
		t.Errorf("stderr lacks the command warning: %q", errb.String())
	}
}

func TestDiffCommandErrors(t *testing.T) {
	cold := filepath.Join(recordFixtureDir, "truth-cold.json")
	for name, args := range map[string][]string{
		"one record":   {cold},
		"three":        {cold, cold, cold},
		"unknown flag": {"--bogus", cold, cold},
		"missing file": {cold, filepath.Join(t.TempDir(), "nope.json")},
	} {
		var out, errb bytes.Buffer
		if code := diffCommand(args, &out, &errb); code != exitUsage {
			t.Errorf("%s: exit %d, want %d", name, code, exitUsage)
		}
		if !strings.Contains(errb.String(), "coldtrace: error:") {
			t.Errorf("%s: stderr %q", name, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := diffCommand([]string{"--help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "usage: coldtrace diff") {
		t.Errorf("--help: exit %d, %q", code, errb.String())
	}
}

// TestDiffSameRecord: one record given twice, or two copies of it, gets a
// warning on the text and on stderr with --json.
func TestDiffSameRecord(t *testing.T) {
	cold := filepath.Join(recordFixtureDir, "truth-cold.json")
	dup := filepath.Join(t.TempDir(), "copy.json")
	data, err := os.ReadFile(cold)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dup, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{cold, cold}, {cold, dup}} {
		var out, errb bytes.Buffer
		if code := diffCommand(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		if !strings.Contains(out.String(), "warning: A and B are one record") || !strings.Contains(out.String(), "A and B took about as long") {
			t.Errorf("%v: text diff:\n%s", args, out.String())
		}
		out.Reset()
		errb.Reset()
		if code := diffCommand(append([]string{"--json"}, args...), &out, &errb); code != 0 {
			t.Fatalf("--json %v: exit %d", args, code)
		}
		if !strings.Contains(errb.String(), "coldtrace: warning: A and B are one record") {
			t.Errorf("--json %v: stderr %q", args, errb.String())
		}
	}
}
