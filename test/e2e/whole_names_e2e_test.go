package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/record"
)

// The size of each named file: past the small-file bound (256 KiB), and a
// partial last page.
const (
	namedFileBytes = mib + 321
	namedFilePages = (namedFileBytes + 4095) / 4096
)

// namedPaths makes, under dir, the files whose names coldtrace must keep
// whole: a Hugging Face blob named by its 64-hex sha256, a 255-byte name,
// 20 levels of 100-byte names, a 4,000-byte path, a name that is not UTF-8
// and one with a newline.
func namedPaths(t *testing.T, dir string) []string {
	t.Helper()
	deep := func(levels, width int) string {
		parts := make([]string, levels)
		for i := range parts {
			parts[i] = strings.Repeat(string(rune('a'+i%26)), width)
		}
		return filepath.Join(parts...)
	}
	// 4,000 bytes: 100-byte directories, one that tops it up, then "near".
	// dir + "/" + levels×("NAME/") + top + "/near"
	rest := 4000 - len(dir) - 1 - len("/near")
	levels := rest / 101
	if rest-levels*101 < 1 {
		levels--
	}
	top := rest - levels*101
	paths := []string{
		filepath.Join(dir, "models--org--m", "blobs", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
		filepath.Join(dir, strings.Repeat("n", 251)+".bin"),
		filepath.Join(dir, deep(20, 100), "weights.bin"),
		filepath.Join(dir, deep(levels, 100), strings.Repeat("z", top), "near"),
		filepath.Join(dir, "caf\xe9 \xff\xfe.bin"),
		filepath.Join(dir, "two\nlines.bin"),
	}
	if n := len(paths[3]); n != 4000 {
		t.Fatalf("the long path is %d bytes, want 4000", n)
	}
	data := bytes.Repeat([]byte("names!"), namedFileBytes/6+1)[:namedFileBytes]
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return paths
}

// checkNamesRecorded: the record names every path byte-exact, uncut, with
// its pages read and missed equal to its size.
func checkNamesRecorded(t *testing.T, recPath string, paths []string) {
	t.Helper()
	rec, err := record.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]record.File{}
	for _, f := range rec.Files {
		byPath[f.Path] = f
	}
	for _, p := range paths {
		f, ok := byPath[p]
		if !ok {
			t.Errorf("the record does not name %q (%d bytes)", p, len(p))
			continue
		}
		if f.NameCut || f.SizeBytes != namedFileBytes || f.PagesAccessed != namedFilePages || f.PagesMissed-f.PagesReread != namedFilePages {
			t.Errorf("%q: cut %v, size %d, pages accessed %d, missed %d (re-read %d); want %d bytes, %d pages",
				p, f.NameCut, f.SizeBytes, f.PagesAccessed, f.PagesMissed, f.PagesReread, namedFileBytes, namedFilePages)
		}
	}
}

// checkResident fails unless each path is cached whole (all) or not at
// all.
func checkResident(t *testing.T, step string, paths []string, all bool) {
	t.Helper()
	for _, p := range paths {
		n := e2eutil.ResidentPages(t, p)
		if (all && n != namedFilePages) || (!all && n != 0) {
			t.Errorf("after %s: %q has %d of %d pages cached", step, p, n, namedFilePages)
		}
	}
}

// noMissingFiles fails on any line of stderr that says a file of the
// record was not found or had no path.
func noMissingFiles(t *testing.T, step, stderr string) {
	t.Helper()
	for _, bad := range []string{"no such file", "has no path", "name too long"} {
		if strings.Contains(strings.ToLower(stderr), bad) {
			t.Errorf("%s: %q on stderr:\n%s", step, bad, stderr)
		}
	}
}

// checkStatusFindsNames: status --from finds every file of the record,
// each with all its pages known.
func checkStatusFindsNames(t *testing.T, recPath string, paths []string, cached bool) {
	t.Helper()
	code, out, stderr := coldtrace(t, nil, "status", "--json", "--from", recPath)
	if code != 0 {
		t.Fatalf("status --from: exit %d\n%s", code, stderr)
	}
	noMissingFiles(t, "status --from", stderr)
	var doc statusJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	named := map[string]bool{}
	for _, f := range doc.Files {
		named[f.Path] = true
		want := uint64(0)
		if cached {
			want = namedFilePages
		}
		if !f.Known || f.Pages != namedFilePages || f.Cached != want {
			t.Errorf("status --from: %q known %v, %d of %d pages cached; want %d of %d", f.Path, f.Known, f.Cached, f.Pages, want, namedFilePages)
		}
	}
	if len(doc.Files) != len(paths) {
		t.Errorf("status --from lists %d files, want the record's %d", len(doc.Files), len(paths))
	}
	// JSON text holds UTF-8 names as they are.
	for _, p := range paths {
		if utf8.ValidString(p) && !named[p] {
			t.Errorf("status --from does not name %q", p)
		}
	}
}

// checkSummaryNames: the JSON summary names every path byte-exact: as
// "path" when it is UTF-8, else in "path_b64".
func checkSummaryNames(t *testing.T, sumPath string, paths []string) {
	t.Helper()
	b, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Files []struct {
			Path    string `json:"path"`
			PathB64 string `json:"path_b64"`
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, f := range doc.Files {
		name := f.Path
		if f.PathB64 != "" {
			raw, err := base64.StdEncoding.DecodeString(f.PathB64)
			if err != nil {
				t.Errorf("summary: path_b64 %q: %v", f.PathB64, err)
			}
			name = string(raw)
		}
		named[name] = true
	}
	for _, p := range paths {
		if !named[p] {
			t.Errorf("the JSON summary does not name %q", p)
		}
	}
}

// TestWholeNamesRoundTrip: files with a 64-hex, a 255-byte, a non-UTF-8
// and a newline name and deep paths up to 4,000 bytes, read cold under
// coldtrace, are named byte-exact in the record with their pages; status,
// prefetch, evict and run --cold, all --from the record, find every one.
func TestWholeNamesRoundTrip(t *testing.T) {
	requireTracing(t)
	t.Setenv("SUDO_UID", "")
	dir := e2eutil.DiskDir(t)
	paths := namedPaths(t, dir)
	for _, p := range paths {
		e2eutil.Evict(t, p)
	}
	checkResident(t, "evicting", paths, false)
	rec := filepath.Join(t.TempDir(), "names.ctrace")
	sumCat := filepath.Join(t.TempDir(), "cat.json")
	// cat itself must be cached, so that the record's only misses are the
	// test's files: DAMON pages out an idle binary within minutes.
	if b, err := exec.Command("cat", "/usr/bin/cat", "/usr/bin/true").Output(); err != nil || len(b) == 0 {
		t.Fatalf("warm cat: %v", err)
	}
	code, _, stderr := coldtrace(t, nil, append([]string{"run", "-q", "-o", rec, "--json", sumCat, "--", "cat"}, paths...)...)
	if code != 0 {
		t.Fatalf("coldtrace run: exit %d\n%s", code, stderr)
	}
	checkNamesRecorded(t, rec, paths)
	checkSummaryNames(t, sumCat, paths)

	code, _, stderr = coldtrace(t, nil, "evict", "--from", rec)
	if code != 0 {
		t.Fatalf("evict --from: exit %d\n%s", code, stderr)
	}
	noMissingFiles(t, "evict --from", stderr)
	checkResident(t, "evict --from", paths, false)
	checkStatusFindsNames(t, rec, paths, false)

	code, _, stderr = coldtrace(t, nil, "prefetch", "--from", rec)
	if code != 0 {
		t.Fatalf("prefetch --from: exit %d\n%s", code, stderr)
	}
	noMissingFiles(t, "prefetch --from", stderr)
	checkResident(t, "prefetch --from", paths, true)
	checkStatusFindsNames(t, rec, paths, true)

	sum := filepath.Join(t.TempDir(), "cold.json")
	code, _, stderr = coldtrace(t, nil, "run", "-q", "--cold=page-cache", "--from", rec, "--json", sum, "--", "true")
	if code != 0 {
		t.Fatalf("run --cold --from: exit %d\n%s", code, stderr)
	}
	noMissingFiles(t, "run --cold --from", stderr)
	m := readColdSummary(t, sum).MadeCold
	if m == nil || m.EvictedFiles != len(paths) || len(m.EvictProblems) != 0 {
		t.Errorf("run --cold --from: made_cold %+v, want the record's %d files evicted", m, len(paths))
	}
	checkResident(t, "run --cold --from", paths, false)
}

// TestCutNameSaidByFrom: a file whose name the record has cut (a path
// over PATH_MAX) is not looked up by evict --from, which says why instead.
func TestCutNameSaidByFrom(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.bin")
	if err := os.WriteFile(whole, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "r.ctrace")
	r := &record.Record{Schema: record.Schema, Command: []string{"cat"}, WallNS: 1, Files: []record.File{
		{ID: 0, Dev: 254 << 20, Ino: 77, Path: "[dev 254:0]…/tail/of/a/long/path", NameCut: true, PagesMissed: 3, BytesFromDisk: 3 << 12},
		{ID: 1, Dev: 254 << 20, Ino: 78, Path: whole, PagesMissed: 1, BytesFromDisk: 1 << 12},
	}}
	if err := record.WriteFile(rec, r); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := coldtrace(t, nil, "evict", "--from", rec)
	if want := "file dev 254:0 inode 77 has its name cut in the record"; !strings.Contains(stderr, want) {
		t.Errorf("evict --from (exit %d): stderr %q lacks %q", code, stderr, want)
	}
	if strings.Contains(stderr, "tail/of/a/long/path") || !strings.Contains(stdout, "1 file") {
		t.Errorf("evict --from looked up the cut name, or not the whole one: stdout %q, stderr %q", stdout, stderr)
	}
}
