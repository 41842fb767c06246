package words

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

func TestMemorySentences(t *testing.T) {
	base := attribution.MemoryCause{File: "/m/model.bin", SizeBytes: 512 << 20, FromDiskBytes: 3 << 29, Factor: 3,
		RereadBytes: 1 << 30, EvictedBytes: 1 << 30, DataBytes: 512 << 20}
	limit := base
	limit.Kind, limit.LimitBytes = attribution.MemoryLimit, 256<<20
	pressure := base
	pressure.Kind, pressure.AvailableBytes = attribution.MemoryPressure, 300<<20
	pressure.Evictor = &record.Evictor{Kind: record.EvictKswapd, Comm: "kswapd0"}
	by := base
	by.Kind = attribution.MemoryEvictedBy
	by.Evictor = &record.Evictor{Kind: record.EvictSyscall, PID: 9, Comm: "python3", Syscall: "fadvise64"}
	for _, c := range []struct {
		m    attribution.MemoryCause
		want []string
	}{
		{limit, []string{"thrashing: /m/model.bin (512.0 MiB) was read from disk 3.0× (1.5 GiB) because the run's memory cgroup limit (256.0 MiB) is below the data it reads",
			"will not be faster (~1.0s)", "Raise the limit above ~0.6 GiB, or read the file once."}},
		{pressure, []string{"memory pressure:", "kswapd (memory pressure) evicted 1.0 GiB", "MemAvailable was down to 300.0 MiB"}},
		{by, []string{"because pid 9 (python3, not traced, fadvise64) evicted 1.0 GiB of it"}},
	} {
		got := Verdict(attribution.Verdict{Kind: attribution.VerdictCold, WarmEstimateNS: 1e9, Memory: &c.m})
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.m.Kind, got, w)
			}
		}
	}
}

func TestContentionSentence(t *testing.T) {
	got := Verdict(attribution.Verdict{Kind: attribution.VerdictWarm, Causes: []attribution.Cause{{Category: attribution.CPU, NS: 1, Pct: 100}},
		Contention: &attribution.Contention{RunQueueNS: 363e6, OthersCount: 2, OthersCPUNS: 1.9e9,
			Others: []record.OtherCPU{{Comm: "sh", Processes: 2, CPUNS: 1.9e9}}}})
	if want := "The run waited 363ms for a CPU: 2 other processes (sh) used 1.9s of CPU during it."; !strings.HasSuffix(got, want) {
		t.Errorf("%q does not end with %q", got, want)
	}
}

func TestFileMachine(t *testing.T) {
	f := record.File{SizeBytes: 4 << 20, PagesMissed: 2048, PagesReread: 1024, PagesShared: 256,
		Evictors:  []record.Evictor{{Kind: record.EvictMemcgReclaim, PID: 7, Comm: "cat", Traced: true, Cgroup: "v1:/t", Pages: 1024}},
		Inserters: []record.Inserter{{PID: 4121, Comm: "cat", Pages: 768}}}
	got := strings.Join(FileMachine(f, 4096), "\n")
	for _, w := range []string{"read from disk 2.0× its size (4.0 MiB again after eviction)",
		"evicted during the run: 4.0 MiB by memory-cgroup reclaim in pid 7 (cat, traced, cgroup v1:/t)",
		"3.0 MiB read from disk by pid 4121 (cat, not traced) during the run", "1.0 MiB of its reads waited for those pages"} {
		if !strings.Contains(got, w) {
			t.Errorf("%q lacks %q", got, w)
		}
	}
	if FileMachine(record.File{PagesMissed: 5}, 4096) != nil {
		t.Error("lines for a file the machine left alone")
	}
}

func TestMachineNotes(t *testing.T) {
	n := Note(attribution.Note{Kind: attribution.NoteSharedRead, Path: "/d/big.bin", Bytes: 312 << 20,
		Inserter: &record.Inserter{PID: 4121, Comm: "cat"}})
	if want := "312.0 MiB of /d/big.bin came from disk through pid 4121 (cat, not traced) while this run waited"; !strings.HasPrefix(n, want) {
		t.Errorf("%q", n)
	}
	n = Note(attribution.Note{Kind: attribution.NoteEvictedBy, Path: "/d/big.bin", Bytes: 512 << 20,
		Evictor: &record.Evictor{Kind: record.EvictSyscall, PID: 9, Comm: "python3", Syscall: "fadvise64"}})
	if want := "512.0 MiB of /d/big.bin was evicted during the run by pid 9 (python3, not traced, fadvise64)"; n != want {
		t.Errorf("%q, want %q", n, want)
	}
}
