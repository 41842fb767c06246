package attribution

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// fastDiskRun is a 5 s run that read a 144 MiB model from a fast disk in
// 30 ms and spent the rest on the CPU.
func fastDiskRun() rec {
	const pages = 144 << 20 / 4096
	r := newRec(5000).proc(1, 0, "python3").file("/models/model.safetensors", pages)
	r.Files[0].SizeBytes = 144 << 20
	r = r.sample(100, []th{{tid: 1, pid: 1, cpu: 70, io: 30}}, fd{0, 30, 0}).
		every(100, 5000, []th{spin(1, 1, 100)})
	return r
}

func TestFastDiskReadIsStillCold(t *testing.T) {
	res := Analyze(fastDiskRun().Record)
	v := res.Verdict
	if v.AvoidableShare >= 0.10 {
		t.Fatalf("the read took %.0f%% of the run; the case needs it small", v.AvoidableShare*100)
	}
	if v.Kind != VerdictCold || !res.Cold || v.ColdBy == nil || !v.ColdBy.Read || v.ColdBy.ReadBytes != 144<<20 {
		t.Fatalf("verdict %+v, cold_by %+v: want cold by 144 MiB read", v, v.ColdBy)
	}
	if want := "cold (read 144.0 MiB from disk in 30ms)"; v.Label != want {
		t.Errorf("label %q, want %q", v.Label, want)
	}
}

// Reads a rerun repeats (pages read again after the run evicted them)
// and reads small next to what the run accessed do not make it cold.
func TestRepeatedOrSmallReadsAreWarm(t *testing.T) {
	r := fastDiskRun()
	r.Files[0].PagesReread = r.Files[0].PagesMissed
	if res := Analyze(r.Record); res.Cold || res.Verdict.Label != "warm" || res.Verdict.ColdBy.ReadBytes != 0 {
		t.Errorf("a run that only re-read pages it evicted: cold %v, label %q, %+v", res.Cold, res.Verdict.Label, res.Verdict.ColdBy)
	}
	// 2 MiB from disk of a 64 GiB model the run accessed whole: 0.003%.
	r = fastDiskRun()
	r.Files[0].SizeBytes, r.Files[0].PagesAccessed = 64<<30, 64<<30/4096
	r.Files[0].PagesMissed, r.Files[0].BytesFromDisk = 512, 2<<20
	if res := Analyze(r.Record); res.Cold || res.Verdict.ColdBy.ReadBytes != 2<<20 || res.Verdict.ColdBy.AccessedBytes != 64<<30 {
		t.Errorf("2 MiB cold of 64 GiB accessed: cold %v, %+v", res.Cold, res.Verdict.ColdBy)
	}
	// Under 1 MiB from disk is warm however large its share.
	r = fastDiskRun()
	r.Files[0].SizeBytes, r.Files[0].PagesAccessed = 512<<10, 128
	r.Files[0].PagesMissed, r.Files[0].BytesFromDisk = 128, 512<<10
	if res := Analyze(r.Record); res.Cold {
		t.Errorf("512 KiB from disk: cold, %+v", res.Verdict.ColdBy)
	}
}

func TestKeptDownloadsAndCacheEntriesAreCold(t *testing.T) {
	base := func() rec { return newRec(1000).every(0, 1000, []th{spin(1, 1, 100)}) }
	dl := func(bytes uint64, path string) *record.Record {
		r := base()
		r.JIT = &record.JIT{Caches: []record.Cache{hubCache("ext4", false)}}
		r.Downloads = []record.Download{{Path: path, Cache: "huggingface", Peer: "127.0.0.1:1", Bytes: bytes,
			StartNS: 0, EndNS: 10 * ms, PID: 1}}
		return r.Record
	}
	for _, c := range []struct {
		name string
		r    *record.Record
		want string
	}{
		{"kept 4 MiB", dl(4<<20, "hub/models--a/blobs/1"), "cold (downloaded 4.0 MiB in 10ms)"},
		{"kept 3 MiB", dl(3<<20, "hub/models--a/blobs/1"), "warm"},
		{"8 MiB in memory", dl(8<<20, ""), "warm"},
	} {
		if got := Analyze(c.r).Verdict.Label; got != c.want {
			t.Errorf("%s: label %q, want %q", c.name, got, c.want)
		}
	}
	compiled := base()
	compiled.JIT = &record.JIT{Caches: []record.Cache{{Name: "numba", Framework: "Numba", Root: "/c", EntriesWritten: 2, CompileNS: 20 * ms}}}
	if got := Analyze(compiled.Record).Verdict.Label; got != "cold (compiled 2 cache entries in 20ms)" {
		t.Errorf("compiled: label %q", got)
	}
	weights := base()
	weights.JIT = &record.JIT{Caches: []record.Cache{hubCache("ext4", false)}}
	weights.JIT.Caches[0].EntriesWritten = 1
	if got := Analyze(weights.Record).Verdict.Label; got != "warm" {
		t.Errorf("an entry of a weights cache with no download: label %q, want warm", got)
	}
	// A compile with no cache is repeated by every rerun.
	nocache := base()
	nocache.JIT = &record.JIT{Compilers: []record.Compiler{{Name: "cc", Runs: 1, WallNS: 900 * ms, CPUNS: 900 * ms}}}
	if got := Analyze(nocache.Record).Verdict.Label; got != "warm" {
		t.Errorf("uncached compile: label %q, want warm", got)
	}
}
