package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
)

// adviceRun traces argv with env and returns its record and JSON summary.
func adviceRun(t *testing.T, env []string, argv ...string) (*record.Record, adviceSummary) {
	t.Helper()
	dir := t.TempDir()
	rec, sum := filepath.Join(dir, "run.rec"), filepath.Join(dir, "sum.json")
	args := append([]string{"run", "-q", "-o", rec, "--json", sum, "--"}, argv...)
	code, _, stderr := coldtrace(t, env, args...)
	if code != 0 {
		t.Fatalf("coldtrace %v: exit %d\n%s", argv, code, stderr)
	}
	r := readRecord(t, rec)
	if err := invariants.Err(r); err != nil {
		t.Errorf("record of %v: %v", argv, err)
	}
	b, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	var s adviceSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary: %v", err)
	}
	s.recPath = rec
	return r, s
}

type adviceSummary struct {
	CacheMisses []advice.CacheMiss      `json:"cache_misses"`
	Persist     []advice.Persist        `json:"persist"`
	Reads       []advice.FileRead       `json:"reads"`
	NoCache     []advice.NoCacheCompile `json:"no_cache"`
	Advice      []advice.Action         `json:"advice"`
	recPath     string
}

func workloadPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "workloads", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fileOf(r *record.Record, path string) *record.File {
	for i := range r.Files {
		if r.Files[i].Path == path {
			return &r.Files[i]
		}
	}
	return nil
}

// A 256 MiB file read by random 4 KiB page faults (MADV_RANDOM) and one
// read sequentially, in one run: the order and the time per miss are
// reported, and only the random one gets the pre-read advice.
func TestAdviceReadOrder(t *testing.T) {
	requireTracing(t)
	const pages = 4096
	seq := evictableFile(t, 256<<20)
	rnd := evictableFile(t, 256<<20)
	r, s := adviceRun(t, nil, "/usr/bin/python3", workloadPath(t, "readorder.py"), seq, rnd, "4096")

	fs, fr := fileOf(r, seq), fileOf(r, rnd)
	if fs == nil || fr == nil || fs.Order == nil || fr.Order == nil {
		t.Fatalf("no read order: seq %+v, random %+v", fs, fr)
	}
	t.Logf("sequential: %+v", *fs.Order)
	t.Logf("random:     %+v", *fr.Order)
	if got := fs.Order.Order(); got != "sequential" {
		t.Errorf("sequential file's order = %q", got)
	}
	if got := fr.Order.Order(); got != "random" {
		t.Errorf("random file's order = %q", got)
	}
	if fs.Order.ReadPages < 65536*9/10 || fs.Order.FaultPages != 0 {
		t.Errorf("sequential file: %d pages by read, %d by fault; want 65536 by read", fs.Order.ReadPages, fs.Order.FaultPages)
	}
	// Each fault brings in its page only (MADV_RANDOM): one miss each.
	if fr.Order.FaultPages < pages*9/10 || fr.Order.FaultPages > pages*11/10 || fr.Order.ReadPages != 0 {
		t.Errorf("random file: %d pages by fault, %d by read; want ~%d by fault", fr.Order.FaultPages, fr.Order.ReadPages, pages)
	}
	if fr.Order.Misses < pages*9/10 {
		t.Errorf("random file: %d misses, want ~%d", fr.Order.Misses, pages)
	}

	var seqRead, rndRead *advice.FileRead
	for i := range s.Reads {
		switch s.Reads[i].Path {
		case seq:
			seqRead = &s.Reads[i]
		case rnd:
			rndRead = &s.Reads[i]
		}
	}
	if seqRead == nil || rndRead == nil {
		t.Fatalf("reads in the summary: %+v", s.Reads)
	}
	t.Logf("%s", seqRead.Sentence)
	t.Logf("%s", rndRead.Sentence)
	if rndRead.MissNS <= 0 || rndRead.BaselineMBps <= 0 || rndRead.MBps*4 > rndRead.BaselineMBps {
		t.Errorf("random read: %+v", rndRead)
	}
	var preRead, seqAdvice int
	for _, a := range s.Advice {
		if strings.Contains(a.Action, rnd) && strings.Contains(a.Action, "pre-read") {
			preRead++
		}
		if strings.Contains(a.Action, seq) {
			seqAdvice++
		}
	}
	if preRead != 1 || seqAdvice != 0 {
		t.Errorf("advice %+v: want the pre-read advice for the random file only", s.Advice)
	}

	// The random read alone has no sequential rate to compare with: the
	// rate alone, no advice; --baseline gives it the first run's.
	evict(t, rnd)
	r2, s2 := adviceRun(t, nil, "/usr/bin/python3", workloadPath(t, "readorder.py"), "-", rnd, "4096")
	if f := fileOf(r2, rnd); f == nil || f.Order.Order() != "random" {
		t.Fatalf("random alone: %+v", f)
	}
	if len(s2.Advice) != 0 {
		t.Errorf("random alone, no baseline: advice %+v", s2.Advice)
	}
	code, out, stderr := coldtrace(t, nil, "report", "--baseline", s.recPath, s2.recPath)
	if code != 0 || !strings.Contains(out, "pre-read it (`coldtrace prefetch`) or disable mmap") {
		t.Errorf("report --baseline: exit %d\n%s\n%s", code, out, stderr)
	}
}
