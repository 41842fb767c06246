package compare_test

import (
	"math"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
	"github.com/coldtrace/coldtrace/report/words"
)

func TestDiffColdWarm(t *testing.T) {
	a, ra := fixture(t, "truth-cold")
	b, rb := fixture(t, "truth-warm")
	d := compare.New(a, b, ra, rb)

	if d.A.WallNS != a.WallNS || d.B.WallNS != b.WallNS || d.DeltaNS != b.WallNS-a.WallNS {
		t.Fatalf("header: walls %d %d, delta %d", d.A.WallNS, d.B.WallNS, d.DeltaNS)
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
	if f := d.Files[0]; f.Change != compare.FileCached || f.APagesMissed == 0 || f.BPagesMissed != 0 || f.ADiskNS == 0 || f.BDiskNS != 0 {
		t.Errorf("model file %+v, want missed in A and cached in B", f)
	}
	for _, f := range d.Files[1:] {
		if strings.Contains(f.Path, "libc") && f.Change != compare.FileCachedInBoth {
			t.Errorf("libc: %q, want %q", f.Change, compare.FileCachedInBoth)
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
		if !strings.Contains(say(d), want) {
			t.Errorf("verdict %q lacks %q", say(d), want)
		}
	}
}

func TestDiffReversed(t *testing.T) {
	a, _ := fixture(t, "truth-warm")
	b, _ := fixture(t, "truth-cold")
	d := compare.New(a, b, nil, nil)
	for _, want := range []string{"B was 3.3s slower", "more disk reads (/home/dev/truth/data/model.bin was not cached)", "more JIT compile (12 more triton cache misses)"} {
		if !strings.Contains(say(d), want) {
			t.Errorf("verdict %q lacks %q", say(d), want)
		}
	}
	if d.Files[0].Change != compare.FileUncached {
		t.Errorf("model file %q, want %q", d.Files[0].Change, compare.FileUncached)
	}
	if !strings.Contains(strings.Join(d.Warnings, "\n"), "recorded before A") {
		t.Errorf("no warning about the order: %v", d.Warnings)
	}
}

func TestDiffSameRun(t *testing.T) {
	a, _ := fixture(t, "cold-ml")
	d := compare.New(a, a, nil, nil)
	if !strings.HasPrefix(say(d), "A and B took about as long") {
		t.Errorf("verdict %q", say(d))
	}
	for _, c := range d.Breakdown {
		if c.DeltaNS != 0 {
			t.Errorf("%s: delta %d comparing a run with itself", c.Category, c.DeltaNS)
		}
	}
	for _, f := range d.Files {
		if f.Change != compare.FileMissedInBoth {
			t.Errorf("%s: %q", f.Path, f.Change)
		}
	}
}

func TestDiffDeltasSum(t *testing.T) {
	recs := fixtures.All(t)
	for an, a := range recs {
		for bn, b := range recs {
			d := compare.New(a, b, nil, nil)
			var sum int64
			for _, c := range d.Breakdown {
				sum += c.DeltaNS
			}
			if sum != d.DeltaNS {
				t.Errorf("%s vs %s: deltas sum to %d, wall difference %d", an, bn, sum, d.DeltaNS)
			}
			if say(d) == "" {
				t.Errorf("%s vs %s: no verdict", an, bn)
			}
		}
	}
}

// TestSameRecordWarns: a record compared with itself (one file given
// twice) says so.
func TestSameRecordWarns(t *testing.T) {
	a := fixtures.Record(t, "truth-cold")
	b := fixtures.Record(t, "truth-cold")
	for _, d := range []*compare.Diff{compare.New(a, a, nil, nil), compare.New(a, b, nil, nil)} {
		if len(d.Warnings) == 0 || !strings.Contains(d.Warnings[0], "A and B are one record") {
			t.Errorf("warnings %q", d.Warnings)
		}
	}
	if d := compare.New(a, fixtures.Record(t, "truth-warm"), nil, nil); strings.Contains(strings.Join(d.Warnings, "\n"), "one record") {
		t.Errorf("cold vs warm called one record: %q", d.Warnings)
	}
}

func fixture(t *testing.T, name string) (*record.Record, *attribution.Result) {
	t.Helper()
	r := fixtures.Record(t, name)
	return r, attribution.Analyze(r)
}

func say(d *compare.Diff) string { return words.Comparison(d.Verdict) }

// TestDiffComparesCallSites: a call site's disk time in A and none in B
// is a change of the whole of it.
func TestDiffComparesCallSites(t *testing.T) {
	a := &record.Record{WallNS: 10e9,
		Stacks: []record.PyStack{{Frames: []record.PyFrame{{File: "/src/load.py", Line: 14, Func: "load_model"}}}},
		Files: []record.File{{ID: 0, Path: "/m/w.bin", PagesMissed: 10, BytesFromDisk: 40 << 10, IOWaitNS: 4e9,
			Stacks: []record.StackCharge{{Stack: 1, PID: 7, NS: 4e9, Bytes: 40 << 10}}}},
		Samples: []record.Sample{{EndNS: 10e9, Files: []record.FileDelta{{File: 0, PagesMissed: 10, IOWaitNS: 4e9}},
			Threads: []record.ThreadDelta{{TID: 7, PID: 7, IOWaitNS: 4e9, CPUNS: 1e9}}}},
		Processes: []record.Process{{PID: 7, Comm: "python3", EndNS: 10e9}}}
	b := &record.Record{WallNS: 6e9, Processes: []record.Process{{PID: 8, Comm: "python3", EndNS: 6e9}}}
	d := compare.New(a, b, nil, nil)
	if len(d.CallSites) != 1 {
		t.Fatalf("call sites %+v", d.CallSites)
	}
	c := d.CallSites[0]
	if c.Site != "load_model (load.py:14)" || c.ANS <= 0 || c.BNS != 0 || c.DeltaNS != -c.ANS {
		t.Errorf("call site %+v", c)
	}
}
