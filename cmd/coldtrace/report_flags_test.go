package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// writeRecordFixture saves a fixture as a record file for report.
func writeRecordFixture(t *testing.T, name string) (string, *record.Record) {
	t.Helper()
	rec := readRecordFixture(t, name)
	path := filepath.Join(t.TempDir(), "run.rec")
	var b bytes.Buffer
	if err := record.Encode(&b, rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, rec
}

// TestReportWritesPprofAndTimelineFiles: report takes --pprof PATH and
// --timeline PATH as run does, and still prints its text on stdout.
func TestReportWritesPprofAndTimelineFiles(t *testing.T) {
	path, rec := writeRecordFixture(t, "cat-cold")
	dir := t.TempDir()
	pp, tl := filepath.Join(dir, "p.pb.gz"), filepath.Join(dir, "t.json")
	var out, errb bytes.Buffer
	if code := reportCommand([]string{"--pprof", pp, "--timeline", tl, path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	checkPprofFile(t, pp, rec.WallNS)
	b, err := os.ReadFile(tl)
	var doc map[string]any
	if err != nil || json.Unmarshal(b, &doc) != nil || doc["traceEvents"] == nil {
		t.Errorf("timeline %s: %v, %.80q", tl, err, b)
	}
	if !strings.Contains(out.String(), "coldtrace") || errb.Len() != 0 {
		t.Errorf("stdout %q, stderr %q: want the text summary and no note", out.String(), errb.String())
	}
	out.Reset()
	if code := reportCommand([]string{"--timeline", "-", path}, &out, &errb); code != 0 || !bytes.Equal(out.Bytes(), b) {
		t.Errorf("--timeline -: exit %d, %d bytes on stdout, want the %d of the file", code, out.Len(), len(b))
	}
	errb.Reset()
	if code := reportCommand([]string{"--timeline", "-", "-o", "-", path}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "stdout") {
		t.Errorf("--timeline - -o -: exit %d, %q: want a usage error", code, errb.String())
	}
}

// TestReportFormatStillWorksWithNote: --format json|pprof|perfetto keeps
// its output for one more release and says what replaces it.
func TestReportFormatStillWorksWithNote(t *testing.T) {
	path, _ := writeRecordFixture(t, "cat-cold")
	var want, errb bytes.Buffer
	if code := reportCommand([]string{"--json", path}, &want, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("--json: exit %d, %q", code, errb.String())
	}
	for _, c := range []struct{ format, instead string }{{"json", "--json"}, {"perfetto", "--timeline PATH"}, {"pprof", "--pprof PATH"}} {
		var out, errb bytes.Buffer
		o := filepath.Join(t.TempDir(), "out")
		if code := reportCommand([]string{"--format", c.format, "-o", o, path}, &out, &errb); code != 0 {
			t.Errorf("--format %s: exit %d, %q", c.format, code, errb.String())
			continue
		}
		if strings.Count(errb.String(), "deprecated") != 1 || !strings.Contains(errb.String(), c.instead) {
			t.Errorf("--format %s: stderr %q: want one note naming %s", c.format, errb.String(), c.instead)
		}
		if b, _ := os.ReadFile(o); c.format == "json" && !bytes.Equal(b, want.Bytes()) {
			t.Errorf("--format json differs from --json")
		} else if len(b) == 0 {
			t.Errorf("--format %s wrote nothing", c.format)
		}
	}
	errb.Reset()
	if code := reportCommand([]string{"--format", "text", path}, &bytes.Buffer{}, &errb); code != 0 || errb.Len() != 0 {
		t.Errorf("--format text: exit %d, %q: want no note", code, errb.String())
	}
}
