package merge

import (
	"strconv"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// fourRanks is a job of four ranks: rank 2 cold (truth-cold), the others
// warm (truth-warm); every rank has a cold "nvidia_ptx" cache, a cause
// common to all.
func fourRanks(t *testing.T) []Input {
	t.Helper()
	var in []Input
	for _, rank := range []int{3, 1, 2, 0} { // not in rank order
		name := "truth-warm"
		if rank == 2 {
			name = "truth-cold"
		}
		r := fixtures.Record(t, name)
		r.Labels = map[string]string{"rank": strconv.Itoa(rank), "host": "node" + strconv.Itoa(rank)}
		if r.JIT == nil {
			r.JIT = &record.JIT{}
		}
		r.JIT.Caches = append(r.JIT.Caches, record.Cache{Name: "nvidia_ptx", Misses: 5, CompileNS: 1e6})
		in = append(in, Input{Source: name + ".json", Record: r})
	}
	return in
}

func TestMergeNamesTheColdRank(t *testing.T) {
	job, err := Merge(fourRanks(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range job.Ranks {
		if want := "rank " + strconv.Itoa(i); r.Name != want {
			t.Errorf("rank %d named %q, want %q (rank order)", i, r.Name, want)
		}
		var sum int64
		for _, row := range r.Rows {
			sum += row.NS
		}
		if sum != r.WallNS || len(r.Rows) != 6 {
			t.Errorf("%s: %d rows summing to %d, wall %d", r.Name, len(r.Rows), sum, r.WallNS)
		}
	}
	if got := job.Ranks[job.Slowest].Name; got != "rank 2" {
		t.Fatalf("slowest %q, want rank 2", got)
	}
	if med := job.Ranks[job.Median]; med.Cold || med.Name == "rank 2" {
		t.Errorf("median %q is the cold rank", med.Name)
	}
	if job.Why == nil || job.Why.Kind != compare.Slower || len(job.Why.With) == 0 {
		t.Fatalf("why %+v", job.Why)
	}
	first := job.Why.With[0]
	if first.Category != attribution.DiskRead || len(first.Files) != 1 || first.Files[0] != "/home/dev/truth/data/model.bin" {
		t.Errorf("first reason %+v, want disk_read for model.bin", first)
	}
	if len(job.Common) != 1 || job.Common[0].Kind != ColdCache || job.Common[0].Name != "nvidia_ptx" || len(job.Common[0].Ranks) != 4 {
		t.Errorf("common causes %+v, want the nvidia_ptx cache on 4 ranks", job.Common)
	}
	var page *Cause
	for i := range job.Particular {
		if job.Particular[i].Kind == PageCache {
			page = &job.Particular[i]
		}
	}
	if page == nil || page.Name != "/home/dev/truth/data/model.bin" || len(page.Ranks) != 1 || page.Ranks[0] != "rank 2" {
		t.Errorf("particular causes %+v, want model.bin on rank 2 only", job.Particular)
	}
	if len(job.Warnings) != 0 {
		t.Errorf("warnings %v", job.Warnings)
	}
}

// A file that became uncached but cost little (a few pages of libc) is
// not named as the reason.
func TestReasonNamesCostlyFilesOnly(t *testing.T) {
	in := fourRanks(t)
	for _, x := range in {
		if x.Record.Labels["rank"] == "2" {
			for i := range x.Record.Files {
				if x.Record.Files[i].Path != "/home/dev/truth/data/model.bin" && x.Record.Files[i].PagesAccessed > 0 {
					x.Record.Files[i].PagesMissed = 1
					x.Record.Files[i].BytesFromDisk = 4096
				}
			}
		}
	}
	job, err := Merge(in)
	if err != nil {
		t.Fatal(err)
	}
	if f := job.Why.With[0].Files; len(f) != 1 || f[0] != "/home/dev/truth/data/model.bin" {
		t.Errorf("reason files %v, want model.bin only", f)
	}
}

func TestMergeWarnsOnDifferentCommands(t *testing.T) {
	in := fourRanks(t)
	in[0].Record.Command = []string{"python", "other.py"}
	job, err := Merge(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(job.Warnings) != 1 {
		t.Fatalf("warnings %v, want one about commands", job.Warnings)
	}
}

func TestMergeOneRecord(t *testing.T) {
	job, err := Merge(fourRanks(t)[:1])
	if err != nil {
		t.Fatal(err)
	}
	if job.Why != nil || job.Slowest != 0 || job.Median != 0 {
		t.Errorf("one record: %+v", job)
	}
	if _, err := Merge(nil); err == nil {
		t.Error("no records merged")
	}
}

// Ranks without labels are named by host, then file; a collision gets
// the file appended.
func TestRankNames(t *testing.T) {
	a, b := fixtures.Record(t, "truth-warm"), fixtures.Record(t, "truth-warm")
	job, err := Merge([]Input{{Source: "x/a.json", Record: a}, {Source: "y/b.json", Record: b}})
	if err != nil {
		t.Fatal(err)
	}
	if job.Ranks[0].Name != "fixture (a.json)" || job.Ranks[1].Name != "fixture (b.json)" {
		t.Errorf("names %q, %q", job.Ranks[0].Name, job.Ranks[1].Name)
	}
}
