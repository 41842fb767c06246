package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

func TestPredict(t *testing.T) {
	const gib = 1 << 30
	triton := kcache.Cache{Name: "triton", Framework: "Triton", Exists: true, Entries: 1180,
		FS: &residency.FSFacts{FS: "ext4", Survival: residency.Persistent}}
	volatile := triton
	volatile.FS = &residency.FSFacts{FS: "tmpfs", Survival: residency.LostAtReboot}
	empty := kcache.Cache{Name: "inductor", Framework: "PyTorch Inductor"}
	off := triton
	off.Disabled = []string{"TRITON_ALWAYS_COMPILE=1: the cache is bypassed"}

	for name, tc := range map[string]struct {
		totals statusTotals
		rate   float64
		caches []kcache.Cache
		state  string
		want   string
	}{
		"warm": {statusTotals{Files: 3, SizeBytes: 13 * gib, CachedBytes: 13 * gib}, 55e6, []kcache.Cache{triton}, "warm",
			"next run: warm for model files (13.0 of 13.0 GiB cached); Triton cache: 1,180 entries"},
		"cold": {statusTotals{Files: 3, SizeBytes: 13 * gib, CachedBytes: gib / 10}, 55e6, []kcache.Cache{volatile, empty}, "cold",
			"next run: cold: 12.9 GiB of model files not cached — about 4 min at the disk rate of the recorded run (55 MB/s); " +
				"Triton cache: 1,180 entries (tmpfs: lost at reboot); PyTorch Inductor cache: empty, everything compiles again"},
		"no rate": {statusTotals{Files: 1, SizeBytes: gib}, 0, nil, "cold", "next run: cold: 1.0 GiB of model files not cached"},
		"unknown": {statusTotals{Files: 2, SizeBytes: gib, UnknownFiles: 2, UnknownBytes: gib}, 0, []kcache.Cache{off}, "unknown",
			"next run: unknown: this user may not see the page cache of model files (1.0 GiB); Triton cache: disabled (TRITON_ALWAYS_COMPILE=1), everything compiles again"},
		"nothing read": {statusTotals{}, 0, []kcache.Cache{triton}, "warm", "next run: no files to read (model files: none); Triton cache: 1,180 entries"},
		"part unknown": {statusTotals{Files: 2, SizeBytes: 2 * gib, CachedBytes: gib, UnknownFiles: 1, UnknownBytes: gib}, 0, nil, "warm",
			"next run: warm for model files (1.0 of 1.0 GiB cached); 1 file (1.0 GiB) unknown to this user"},
	} {
		p := predict(tc.totals, tc.rate, "model files", tc.caches)
		if p.State != tc.state || p.Sentence != tc.want {
			t.Errorf("%s:\n got %s %q\nwant %s %q", name, p.State, p.Sentence, tc.state, tc.want)
		}
	}
}

func TestStatusFormatting(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1180: "1,180", 1234567: "1,234,567", -1180: "-1,180"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for ns, want := range map[int64]string{4e6: "under 0.1 s", 2.5e9: "2.5 s", 42e9: "42 s", 235e9: "4 min"} {
		if got := roughDuration(ns); got != want {
			t.Errorf("roughDuration(%d) = %q, want %q", ns, got, want)
		}
	}
	if got := shortFilePath("/a/very/long/path/model.safetensors", 20); !strings.HasSuffix(got, "model.safetensors") || len([]rune(got)) != 20 {
		t.Errorf("shortFilePath: %q", got)
	}
}

// A record whose run read nothing from disk and used only an in-tree
// cache still gets a table and a prediction.
func TestStatusRecordWithoutFiles(t *testing.T) {
	t.Setenv("SUDO_UID", "")
	path := filepath.Join(t.TempDir(), "r.ctrace")
	rec := &record.Record{Schema: record.Schema, WallNS: 1e9,
		JIT: &record.JIT{Caches: []record.Cache{{Name: "python", Framework: "Python bytecode", Root: "**/__pycache__"}}}}
	if err := record.WriteFile(path, rec); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := statusCommand([]string{"--from", path}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "next run: no files to read") || !strings.Contains(out.String(), "kernel caches") {
		t.Errorf("exit %d\n%s%s", code, out.String(), errb.String())
	}
}
