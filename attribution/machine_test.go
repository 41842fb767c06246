package attribution

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// thrashRecord: one reader reads a 512 MiB file three times in 1.2 s of
// I/O wait and fill CPU, evicting it itself through its cgroup's limit.
func thrashRecord() *record.Record {
	const pages = 131072
	r := &record.Record{WallNS: 1.2e9, IntervalNS: 100e6, Host: record.Host{PageSize: 4096},
		Files: []record.File{{ID: 0, Path: "/m/model.bin", SizeBytes: 512 << 20, PagesAccessed: 3 * pages, PagesMissed: 3 * pages,
			PagesEvicted: 2 * pages, PagesReread: 2 * pages, IOWaitNS: 600e6, MissCPUNS: 600e6,
			Evictors: []record.Evictor{{Kind: record.EvictMemcgReclaim, PID: 7, Comm: "cat", Traced: true, Cgroup: "v1:/thrash", Pages: 2 * pages}}}},
		Processes: []record.Process{{PID: 7, Comm: "cat", EndNS: 1.2e9, Exited: true, Threads: 1, CPUNS: 600e6, OffCPUNS: 600e6, IOWaitNS: 600e6, MissCPUNS: 600e6}},
		Threads:   []record.Thread{{TID: 7, PID: 7, Comm: "cat", CPUNS: 600e6, OffCPUNS: 600e6, IOWaitNS: 600e6, MissCPUNS: 600e6}},
		Machine:   &record.Machine{Cgroups: []record.Cgroup{{Version: 1, Path: "/thrash", LimitBytes: 256 << 20, PIDs: []int32{7}}}},
	}
	for i := int64(1); i <= 12; i++ {
		r.Samples = append(r.Samples, record.Sample{EndNS: i * 100e6,
			Threads: []record.ThreadDelta{{TID: 7, PID: 7, CPUNS: 50e6, MissCPUNS: 50e6, IOWaitNS: 50e6}},
			Files:   []record.FileDelta{{File: 0, IOWaitNS: 50e6, MissCPUNS: 50e6}}})
	}
	return r
}

func TestThrashingKeepsRereadTime(t *testing.T) {
	res := Analyze(thrashRecord())
	disk := res.Row(DiskRead).NS
	if disk != 1.2e9 {
		t.Fatalf("disk_read %d, want all of the wall", disk)
	}
	// Two of the three reads were re-reads: a rerun reads them again.
	if want := disk * 2 / 3; res.RereadNS < want-1 || res.RereadNS > want+1 {
		t.Errorf("re-read time %d, want %d", res.RereadNS, want)
	}
	if res.WarmEstimateNS < res.RereadNS {
		t.Errorf("warm estimate %d drops re-read time %d", res.WarmEstimateNS, res.RereadNS)
	}
	m := res.Verdict.Memory
	if m == nil {
		t.Fatal("no memory cause")
	}
	if m.Kind != MemoryLimit || m.LimitBytes != 256<<20 || m.Cgroup != "/thrash" || m.Factor != 3 ||
		m.DataBytes != 512<<20 || m.Evictor == nil || !m.Evictor.Traced {
		t.Errorf("memory cause %+v", m)
	}
}

func TestEvictedByAnotherProcess(t *testing.T) {
	r := thrashRecord()
	r.Files[0].Evictors = []record.Evictor{{Kind: record.EvictSyscall, PID: 9, Comm: "python3", Syscall: "fadvise64", Pages: 2 * 131072}}
	r.Machine.Cgroups = nil
	res := Analyze(r)
	if m := res.Verdict.Memory; m == nil || m.Kind != MemoryEvictedBy || m.Evictor.PID != 9 {
		t.Fatalf("memory cause %+v", m)
	}
	// Said in the verdict, not again as a note.
	for _, n := range res.Notes {
		if n.Kind == NoteEvictedBy {
			t.Errorf("note repeats the verdict: %+v", n)
		}
	}
	r.Files[0].PagesReread = 0 // evicted, never read again: a note only
	res = Analyze(r)
	if res.Verdict.Memory != nil {
		t.Errorf("memory cause without re-reads: %+v", res.Verdict.Memory)
	}
	found := false
	for _, n := range res.Notes {
		found = found || n.Kind == NoteEvictedBy && n.Evictor != nil && n.Evictor.PID == 9 && n.Bytes == 1<<30
	}
	if !found {
		t.Errorf("no evicted_by note: %+v", res.Notes)
	}
}

func TestKswapdIsPressure(t *testing.T) {
	r := thrashRecord()
	r.Files[0].Evictors = []record.Evictor{{Kind: record.EvictKswapd, PID: 80, Comm: "kswapd0", Pages: 2 * 131072}}
	r.Machine = &record.Machine{MemStart: record.MemInfo{AvailableBytes: 900 << 20}, MemEnd: record.MemInfo{AvailableBytes: 300 << 20}}
	m := Analyze(r).Verdict.Memory
	if m == nil || m.Kind != MemoryPressure || m.AvailableBytes != 300<<20 {
		t.Fatalf("memory cause %+v", m)
	}
}

// TestFillWaitIsDisk: a reader runnable inside its fill for 40 ms of
// each 100 ms gives that time to disk_read, not to cpu; its own
// run-queue wait outside fills stays cpu.
func TestFillWaitIsDisk(t *testing.T) {
	r := &record.Record{WallNS: 500e6, IntervalNS: 100e6}
	for i := int64(1); i <= 5; i++ {
		r.Samples = append(r.Samples, record.Sample{EndNS: i * 100e6,
			Threads: []record.ThreadDelta{{TID: 1, PID: 1, CPUNS: 40e6, MissCPUNS: 30e6, IOWaitNS: 10e6, RunQueueNS: 50e6,
				FillWaitNS: 45e6, FillRunQueueNS: 40e6, OtherWaitNS: 0}}})
	}
	res := Analyze(r)
	// disk: io 10 + miss 30 + fill run queue 40 (+ other-wait part 0) per slice.
	if got := res.Row(DiskRead).NS; got != 400e6 {
		t.Errorf("disk_read %d, want 400ms", got)
	}
	// cpu: cpu 40 - miss 30 + run queue 50 - fill run queue 40.
	if got := res.Row(CPU).NS; got != 100e6 {
		t.Errorf("cpu %d, want 100ms", got)
	}
}

func TestContention(t *testing.T) {
	r := &record.Record{WallNS: 1e9, IntervalNS: 100e6,
		Processes: []record.Process{{PID: 1, RunQueueNS: 300e6, FillRunQueueNS: 100e6}},
		Machine: &record.Machine{OthersCPUNS: 1.9e9, OthersCount: 2,
			Others: []record.OtherCPU{{Comm: "sh", Processes: 2, CPUNS: 1.9e9}}}}
	c := Analyze(r).Verdict.Contention
	if c == nil || c.RunQueueNS != 300e6 || c.FillRunQueueNS != 100e6 || c.OthersCount != 2 {
		t.Fatalf("contention %+v", c)
	}
	r.Processes[0].RunQueueNS = 10e6 // 1% of the wall: not worth saying
	if c := Analyze(r).Verdict.Contention; c != nil {
		t.Errorf("contention named for 10ms: %+v", c)
	}
	r.Processes[0].RunQueueNS = 300e6
	r.Machine.OthersCPUNS, r.Machine.OthersCount, r.Machine.Others = 0, 0, nil
	if c := Analyze(r).Verdict.Contention; c != nil {
		t.Errorf("contention named with nothing else running: %+v", c)
	}
}
