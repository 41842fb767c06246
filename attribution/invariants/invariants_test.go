package invariants_test

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// TestFixturesHold: every recorded run, the real one (cat-cold, traced on
// the development VM) included, keeps every invariant.
func TestFixturesHold(t *testing.T) {
	for name, r := range fixtures.All(t) {
		if err := invariants.Err(r); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCorruptedCopiesFail: each corruption breaks its rule, and the
// message names the subject and the numbers.
func TestCorruptedCopiesFail(t *testing.T) {
	for _, tc := range []struct {
		name, fixture string
		corrupt       func(r *record.Record)
		rule          string
		msg           []string
	}{
		{"negative wall", "truth-cold", func(r *record.Record) { r.WallNS = -5 }, invariants.RuleWallSum, []string{"wall is -5ns"}},
		{"fill CPU above the fillers' CPU", "cat-cold", func(r *record.Record) {
			// 544 ms of fill CPU charged to a file whose only reader used far less.
			for i := range r.Files {
				if strings.HasSuffix(r.Files[i].Path, "/big.bin") {
					r.Files[i].MissCPUNS = 544e6
				}
			}
		}, invariants.RuleFillCPU, []string{"(/tmp/ctrec/big.bin)", "fill CPU 544ms exceeds the 45.594795ms of CPU"}},
		{"fill CPU above a thread's CPU", "truth-cold", func(r *record.Record) { r.Threads[0].MissCPUNS = r.Threads[0].CPUNS + 1 },
			invariants.RuleFillCPU, []string{"thread 500/500 (sh)"}},
		{"fill CPU outside its intervals", "reader-spinner", func(r *record.Record) {
			// The file's fill CPU, all of it in intervals where the
			// filling thread ran 10 ms, moved to the totals: 100 ms more
			// than the samples allow plus one interval.
			r.Files[0].MissCPUNS += 300e6
			r.Threads[1].CPUNS += 300e6
			r.Threads[1].MissCPUNS += 300e6
		}, invariants.RuleFillCPU, []string{"in the intervals it was filled"}},
		{"thread longer than its process", "truth-warm", func(r *record.Record) { r.Threads[0].OffCPUNS += 150e6 },
			invariants.RuleThreadTime, []string{"thread 500/500 (sh)", "exceeds its process's lifetime 2.2s"}},
		{"main thread shorter than its process", "sleep-read-spin", func(r *record.Record) { r.Threads[0].OffCPUNS = 0 },
			invariants.RuleThreadTime, []string{"falls short of its lifetime 3.48s"}},
		{"file I/O wait above the total", "truth-cold", func(r *record.Record) { r.Files[1].IOWaitNS = 1 },
			invariants.RuleFileIOWait, []string{"sums to 1.400000001s, more than the threads' total 1.4s"}},
		{"direct wait above the file's I/O wait", "truth-cold", func(r *record.Record) { r.Files[0].DirectWaitNS = r.Files[0].IOWaitNS + 1 },
			invariants.RuleFileIOWait, []string{"direct-I/O wait", "exceeds the file's I/O wait"}},
		{"misses beyond accesses", "truth-cold", func(r *record.Record) { r.Files[0].PagesMissed = r.Files[0].PagesAccessed + 1025 },
			invariants.RuleAccessedMiss, []string{"263165 pages missed but only 262140 accessed (readahead allows 1024 more, re-reads after eviction 0)"}},
		{"fill wait above the off-CPU time", "truth-cold", func(r *record.Record) {
			r.Threads[0].FillWaitNS = r.Threads[0].OffCPUNS - r.Threads[0].IOWaitNS + 1
		}, invariants.RuleFillWait, []string{"thread 500/500 (sh)", "fill wait"}},
		{"fill run queue above the run queue", "truth-cold", func(r *record.Record) {
			r.Threads[0].FillWaitNS, r.Threads[0].FillRunQueueNS = 1, 1
			r.Threads[0].RunQueueNS = 0
		}, invariants.RuleFillWait, []string{"fill run-queue wait 1ns"}},
		{"files' fill wait above the threads'", "truth-cold", func(r *record.Record) { r.Files[0].FillWaitNS = 1e9 },
			invariants.RuleFillWait, []string{"the files' fill wait sums to 1s"}},
		{"re-read beyond evicted", "truth-cold", func(r *record.Record) { r.Files[0].PagesReread = 1 },
			invariants.RuleReread, []string{"1 pages read again", "0 evicted"}},
		{"shared beyond accessed", "truth-cold", func(r *record.Record) { r.Files[0].PagesShared = r.Files[0].PagesAccessed + 1 },
			invariants.RuleReread, []string{"pages read from another reader's fill"}},
		{"evictors beyond evicted", "truth-cold", func(r *record.Record) {
			r.Files[0].Evictors = []record.Evictor{{Kind: record.EvictKswapd, Pages: r.Files[0].PagesEvicted + 1}}
		}, invariants.RuleReread, []string{"evictors account for"}},
		{"a download under the minimum", "cold-ml", func(r *record.Record) { r.Downloads[0].Bytes = 1 << 20 },
			invariants.RuleDownloadSize, []string{"download 0 (/home/dev/.cache/huggingface/hub/models--Qwen--Qwen-Image/blobs/3f2a from 18.65.25.3:443)",
				"1048576 bytes received, under the 4194304"}},
		{"a download past the exit", "cold-ml", func(r *record.Record) { r.Downloads[0].EndNS = r.WallNS + 2*r.IntervalNS },
			invariants.RuleDownloadTime, []string{"bytes from 0s to 6.2s: not a span within the run's 6s (+100ms)"}},
		{"a download's samples short of its bytes", "cold-ml", func(r *record.Record) {
			r.Downloads[0].Samples = []record.DownloadSample{{EndNS: 1e8, Bytes: 1}}
		}, invariants.RuleDownloadTime, []string{"its samples sum to 1 bytes, not its 314572800"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fixtures.Record(t, tc.fixture)
			if err := invariants.Err(r); err != nil {
				t.Fatalf("fixture already broken: %v", err)
			}
			tc.corrupt(r)
			vs := invariants.Check(r)
			var got []string
			found := false
			for _, v := range vs {
				got = append(got, v.String())
				if v.Rule != tc.rule {
					continue
				}
				ok := true
				for _, m := range tc.msg {
					ok = ok && strings.Contains(v.String(), m)
				}
				found = found || ok
			}
			if !found {
				t.Errorf("want a %s violation saying %q; got %q", tc.rule, tc.msg, got)
			}
			if err := invariants.Err(r); err == nil || !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("Err = %v", err)
			}
		})
	}
}

// TestWrittenFilesMayMissWithoutAccess: pages a write created are not
// misses of a read, and a file nobody accessed has no read path.
func TestWrittenFilesMayMissWithoutAccess(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	r.Files = append(r.Files, record.File{ID: 2, Path: "/out/w.bin", PagesCreated: 10, PagesAccessed: 1, PagesMissed: 5000},
		record.File{ID: 3, Path: "/prefetched", PagesMissed: 5000})
	if err := invariants.Err(r); err != nil {
		t.Error(err)
	}
}
