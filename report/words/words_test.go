package words

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record"
)

func TestNotes(t *testing.T) {
	half := 50.0
	for _, c := range []struct {
		note attribution.Note
		want string
	}{
		{attribution.Note{Kind: attribution.NoteStartError, Text: "exec: no such file"}, "the command could not be started: exec: no such file"},
		{attribution.Note{Kind: attribution.NoteInterrupted}, "coldtrace was interrupted before the command ended"},
		{attribution.Note{Kind: attribution.NoteKilled, Text: "SIGKILL", ExitCode: 137}, "the command was killed by SIGKILL (exit 137)"},
		{attribution.Note{Kind: attribution.NoteLost, Lost: &record.Lost{RingBuffer: 2, FillEnds: 1}},
			"3 events were lost (ring buffer 2, file table 0, thread table 0, tracked table 0, paths 0, fill ends 1)"},
		{attribution.Note{Kind: attribution.NoteUnobservedAll, NS: 5e9}, "no thread samples cover the run"},
		{attribution.Note{Kind: attribution.NoteUnobservedTail, NS: 30e6}, "the last 30ms after the final sample"},
		{attribution.Note{Kind: attribution.NoteAfterExit, NS: 1500e6}, "1.5s of thread time after the exit"},
		{attribution.Note{Kind: attribution.NoteGPUUnavailable, Text: "no NVIDIA GPU"}, "GPU: no NVIDIA GPU"},
		{attribution.Note{Kind: attribution.NoteGPUShared, GPU: 1, Processes: 2, Names: []string{"a", "pid 7"}, RunSharePct: &half},
			"GPU 1 was also used by 2 untraced process(es) (a, pid 7): gpu_compute counts the run's share of its work (50%)"},
		{attribution.Note{Kind: attribution.NoteGPUShared, Names: []string{"a"}, Processes: 1}, "the run's share is unknown"},
	} {
		if got := Note(c.note); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.note.Kind, got, c.want)
		}
	}
	if Notes(nil) != nil {
		t.Error("no notes, yet words")
	}
}

func TestWarmVerdictNamesTheMainAvoidableCost(t *testing.T) {
	v := attribution.Verdict{Kind: attribution.VerdictWarm, AvoidableNS: 180e6, AvoidableShare: 0.02,
		Causes: []attribution.Cause{{Category: attribution.CPU, NS: 9e9, Pct: 90}},
		Mostly: &attribution.Cause{Category: attribution.JITCompile, NS: 180e6, Pct: 2, Names: []string{"ptxas"}}}
	const want = "warm run: 90% CPU; disk reads, compiles and downloads took only 2% (180ms), mostly JIT compile (ptxas), so a warm rerun would save little."
	if got := Verdict(v); got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
	v.AvoidableShare, v.AvoidableNS = 0.004, 4e6
	if got := Verdict(v); !strings.Contains(got, "took only <1% (4ms)") {
		t.Errorf("small share: %q", got)
	}
	cold := attribution.Verdict{Kind: attribution.VerdictCold, WarmEstimateNS: 210e9, Causes: []attribution.Cause{
		{Category: attribution.DiskRead, NS: 1, Pct: 0, Names: []string{"/m/a.bin"}, OtherFiles: 3},
		{Category: attribution.Download, NS: 5, Pct: 12, Names: []string{"/home/u/.cache/huggingface/hub/models--Org--Model/blobs/0123456789abcdef"}}}}
	const coldWant = "cold start: <1% disk reads (/m/a.bin and 3 other files not in page cache), 12% downloads (…/hub/models--Org--Model/blobs/0123456789abcdef); a warm rerun should take ~3m30s."
	if got := Verdict(cold); got != coldWant {
		t.Errorf("verdict\n%q, want\n%q", got, coldWant)
	}
}

func TestComparisonDetails(t *testing.T) {
	v := compare.Verdict{Kind: compare.Slower, AWallNS: 1e9, BWallNS: 3e9, DeltaNS: 2e9,
		With: []compare.Change{
			{Category: attribution.DiskRead, DeltaNS: 1e9, ABytesFromDisk: 1 << 20, BBytesFromDisk: 1 << 30},
			{Category: attribution.JITCompile, DeltaNS: 600e6, Compilers: []compare.RunsChange{{Name: "ptxas", ARuns: 1, BRuns: 40}}},
			{Category: attribution.Download, DeltaNS: 300e6, Downloads: []compare.DownloadChange{{Name: "/a"}, {Name: "/b"}, {Name: "/c"}, {Name: "/d"}}},
		},
		Against: []compare.Change{{Category: attribution.GPUCompute, DeltaNS: -300e6, GPU: &compare.UtilChange{AUtilMeanPct: 90, BUtilMeanPct: 40}}},
	}
	const want = "B was 2.0s slower (1.0s → 3.0s): 1.0s more disk reads (1.0 GiB read from disk instead of 1.0 MiB), " +
		"600ms more JIT compile (ptxas ran 40 times instead of once), 300ms more downloads (/a and 3 other files were downloaded); " +
		"but 300ms less GPU compute (mean utilization 90% → 40%)."
	if got := Comparison(v); got != want {
		t.Errorf("comparison\n%q, want\n%q", got, want)
	}
	less := compare.Verdict{Kind: compare.Faster, AWallNS: 3e9, BWallNS: 1e9, DeltaNS: -2e9, With: []compare.Change{
		{Category: attribution.JITCompile, DeltaNS: -1e9, Caches: []compare.CacheChange{{Name: "triton", Count: 1}, {Name: "inductor", Count: 1204}}},
		{Category: attribution.Download, DeltaNS: -1e9, Downloads: []compare.DownloadChange{{Name: "model.safetensors", Bytes: 64 << 20, NS: 19e8, Cache: "huggingface"}}}}}
	const lessWant = "B was 2.0s faster (3.0s → 1.0s): 1.0s less JIT compile (1 triton kernel was a cache hit, 1,204 inductor kernels were cache hits), " +
		"1.0s less downloads (B did not download model.safetensors, 64.0 MiB in 1.9s: it was in the huggingface cache)."
	if got := Comparison(less); got != lessWant {
		t.Errorf("comparison\n%q, want\n%q", got, lessWant)
	}
	if got := Comparison(compare.Verdict{Kind: compare.Same, AWallNS: 1e9, BWallNS: 1e9}); got != "A and B took about as long (1.0s → 1.0s)." {
		t.Errorf("same: %q", got)
	}
}

func TestDownloadWords(t *testing.T) {
	base := attribution.DownloadEvidence{Path: "/h/.cache/huggingface/hub/models--o--m/blobs/ab", Name: "model.safetensors",
		Bytes: 64 << 20, MBPerS: 33.4, Peer: "127.0.0.1:8765", Count: 1, Cache: "huggingface", CacheFS: "ext4"}
	cases := map[attribution.Fate]string{
		attribution.FateKept:      "model.safetensors, 64.0 MiB from 127.0.0.1:8765 at 33 MB/s, into the huggingface cache: kept for the next run",
		attribution.FateDeleted:   "model.safetensors, 64.0 MiB from 127.0.0.1:8765 at 33 MB/s, into a file deleted before the exit: a rerun downloads it again",
		attribution.FateVolatile:  "model.safetensors, 64.0 MiB from 127.0.0.1:8765 at 33 MB/s, into the huggingface cache on ext4, lost at reboot: a rerun after a reboot downloads it again",
		attribution.FateContainer: "model.safetensors, 64.0 MiB from 127.0.0.1:8765 at 33 MB/s, into the huggingface cache in a container's writable layer, lost with the container: a rerun in a new container downloads it again",
		attribution.FateNoCache:   "model.safetensors, 64.0 MiB from 127.0.0.1:8765 at 33 MB/s, outside any known cache: a rerun may download it again",
	}
	for fate, want := range cases {
		d := base
		d.Fate = fate
		if got := Download(d); got != want {
			t.Errorf("%s:\n%q, want\n%q", fate, got, want)
		}
	}
	mem := attribution.DownloadEvidence{Path: "(in memory, from hub.example)", Name: "(in memory, from hub.example)", Bytes: 8 << 20,
		MBPerS: 120, Peer: "10.0.0.1:443", Host: "hub.example", Count: 2, Fate: attribution.FateMemory}
	if got, want := Download(mem), "8.0 MiB from hub.example at 120 MB/s (2 downloads), kept in memory: a rerun downloads it again"; got != want {
		t.Errorf("in memory:\n%q, want\n%q", got, want)
	}
	v := attribution.Verdict{Kind: attribution.VerdictCold, WarmEstimateNS: 2e8, Causes: []attribution.Cause{
		{Category: attribution.Download, NS: 18e8, Pct: 89, Names: []string{"model.safetensors"}, Download: &base}}}
	if got, want := Verdict(v), "cold start: 89% downloads (model.safetensors, 64.0 MiB from 127.0.0.1:8765 at 33 MB/s, outside any known cache: a rerun may download it again); a warm rerun should take ~200ms."; got != want {
		t.Errorf("verdict:\n%q, want\n%q", got, want)
	}
}

// TestFilesWithNoMissAreNotCalledUncached: a file whose disk time was
// only waits on pages already being read in is not "not in page cache".
func TestFilesWithNoMissAreNotCalledUncached(t *testing.T) {
	v := attribution.Verdict{Kind: attribution.VerdictWarm, AvoidableNS: 38e3, AvoidableShare: 0.001,
		Causes: []attribution.Cause{{Category: attribution.CPU, NS: 9e6, Pct: 90}},
		Mostly: &attribution.Cause{Category: attribution.DiskRead, NS: 38e3, Names: []string{"/usr/bin/dd"}, NoneMissed: true}}
	got := Verdict(v)
	if strings.Contains(got, "not in page cache") || !strings.Contains(got, "waiting for /usr/bin/dd already being read in") {
		t.Errorf("verdict %q", got)
	}
}

func TestWarmVerdictNamesDiskTimeARerunRepeats(t *testing.T) {
	v := attribution.Verdict{Kind: attribution.VerdictWarm, RecurringNS: 700e6, Causes: []attribution.Cause{
		{Category: attribution.DiskRead, NS: 700e6, Pct: 70, Recurring: true, Names: []string{"/data/shard.bin"}},
		{Category: attribution.CPU, NS: 300e6, Pct: 30}}}
	const want = "warm run: 70% disk reads (direct I/O of /data/shard.bin, which a rerun repeats), 30% CPU; what it read from disk a rerun reads again, and nothing came from a compiler or the network, so a rerun should take about as long."
	if got := Verdict(v); got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
	v.Causes[0].Names = []string{attribution.OutsidePageCache}
	if got := Verdict(v); !strings.Contains(got, "70% disk reads (I/O outside the page cache, which a rerun repeats)") {
		t.Errorf("outside the page cache: %q", got)
	}
}

// TestComparisonCountsDirectReads: a disk change of runs that read with
// direct I/O says so, not "0 B read from disk".
func TestComparisonCountsDirectReads(t *testing.T) {
	v := compare.Verdict{Kind: compare.Slower, AWallNS: 100e6, BWallNS: 300e6, DeltaNS: 200e6, With: []compare.Change{
		{Category: attribution.DiskRead, DeltaNS: 134e6, ABytesFromDisk: 20 << 10, ADirectBytes: 64 << 20, BDirectBytes: 64 << 20}}}
	const want = "134ms more disk reads (64.0 MiB read with direct I/O in both; 0 B through the page cache instead of 20.0 KiB)"
	if got := Comparison(v); !strings.Contains(got, want) {
		t.Errorf("comparison\n%q, want it to hold\n%q", got, want)
	}
	v.With[0].ABytesFromDisk, v.With[0].BDirectBytes = 0, 128<<20
	if got := Comparison(v); !strings.Contains(got, "(128.0 MiB read with direct I/O instead of 64.0 MiB)") {
		t.Errorf("comparison %q", got)
	}
}
