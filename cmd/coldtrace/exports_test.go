package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/timelinecheck"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
	"github.com/coldtrace/coldtrace/report/summary"
)

const recordFixtureDir = "../../testdata/records"

func readRecordFixture(t *testing.T, name string) *record.Record {
	t.Helper()
	return fixtures.Record(t, name)
}

func checkPprofFile(t *testing.T, path string, wallNS int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var wall int64
	for _, s := range p.Sample {
		wall += s.Value[0]
	}
	if wall != wallNS {
		t.Errorf("%s: wall values sum to %d, want %d", path, wall, wallNS)
	}
}

func checkTimelineFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := timelinecheck.Validate(data); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

func TestWriteExports(t *testing.T) {
	rec := readRecordFixture(t, "cold-ml")
	dir := t.TempDir()
	pp, tl := filepath.Join(dir, "run.pb.gz"), filepath.Join(dir, "run.trace.json")
	if err := writeExports(self(t), nil, rec, nil, pp, tl); err != nil {
		t.Fatal(err)
	}
	checkPprofFile(t, pp, rec.WallNS)
	checkTimelineFile(t, tl)

	// Nothing asked, nothing written.
	empty := t.TempDir()
	if err := writeExports(self(t), nil, rec, nil, "", ""); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("files written without paths: %v", ents)
	}
}

func TestExportFlags(t *testing.T) {
	var o exportOptions
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	o.addFlags(fs)
	dir := t.TempDir()
	if err := fs.Parse([]string{"--pprof", filepath.Join(dir, "p.pb.gz"), "--timeline", filepath.Join(dir, "t.json")}); err != nil {
		t.Fatal(err)
	}
	rec := readRecordFixture(t, "truth-cold")
	if err := o.write(self(t), nil, rec, nil); err != nil {
		t.Fatal(err)
	}
	checkPprofFile(t, o.pprofPath, rec.WallNS)
	checkTimelineFile(t, o.timelinePath)

	bad := exportOptions{timelinePath: filepath.Join(dir, "no-such-dir", "t.json")}
	if err := bad.write(self(t), nil, rec, nil); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	// One failing export does not stop the other.
	pp := filepath.Join(dir, "only.pb.gz")
	if err := writeExports(self(t), nil, rec, nil, pp, bad.timelinePath); err == nil {
		t.Error("no error for the failed timeline")
	}
	checkPprofFile(t, pp, rec.WallNS)
}

func TestReportFormat(t *testing.T) {
	for _, c := range []struct {
		format string
		json   bool
		want   string
	}{
		{"", false, "text"}, {"text", false, "text"}, {"", true, "json"}, {"json", true, "json"},
		{"JSON", false, "json"}, {"pprof", false, "pprof"}, {"perfetto", false, "perfetto"},
		{"timeline", false, "perfetto"}, {"chrome", false, "perfetto"},
	} {
		got, err := reportFormat(c.format, c.json)
		if err != nil || got != c.want {
			t.Errorf("reportFormat(%q, %v) = %q, %v; want %q", c.format, c.json, got, err, c.want)
		}
	}
	for _, c := range []struct {
		format string
		json   bool
	}{{"html", false}, {"pprof", true}, {"svg", false}} {
		if _, err := reportFormat(c.format, c.json); !errors.Is(err, errUsage) {
			t.Errorf("reportFormat(%q, %v): %v, want a usage error", c.format, c.json, err)
		}
	}
}

func TestWriteReportFormats(t *testing.T) {
	rec := readRecordFixture(t, "cold-ml")
	dir := t.TempDir()
	for _, f := range reportFormats {
		path := filepath.Join(dir, "out."+f)
		if err := writeReport(self(t), path, f, nil, rec, nil, 10); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch f {
		case "text":
			if !strings.Contains(string(data), "python3 generate.py") {
				t.Errorf("text report:\n%s", data)
			}
		case "json":
			var doc struct {
				Schema string `json:"schema"`
			}
			if err := json.Unmarshal(data, &doc); err != nil || doc.Schema != summary.Schema {
				t.Errorf("json report: schema %q, %v", doc.Schema, err)
			}
		case "pprof":
			checkPprofFile(t, path, rec.WallNS)
		case "perfetto":
			checkTimelineFile(t, path)
		}
	}
	// To stdout.
	var out bytes.Buffer
	if err := writeReport(self(t), "-", "perfetto", &out, rec, nil, 10); err != nil {
		t.Fatal(err)
	}
	if err := timelinecheck.Validate(out.Bytes()); err != nil {
		t.Error(err)
	}
	if err := renderReport("svg", &out, rec, nil, 10); !errors.Is(err, errUsage) {
		t.Errorf("unknown format: %v", err)
	}
}

// self is the test's own user, as coldtrace acts for it outside sudo.
func self(t *testing.T) actor.Actor {
	t.Helper()
	a, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
