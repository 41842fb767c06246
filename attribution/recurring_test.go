package attribution

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// A model read from FUSE is read again on every run: the run is not cold
// by it, and the warm estimate keeps its read time.
func TestFUSEReadsAreNotColdAndStayInTheWarmEstimate(t *testing.T) {
	local := Analyze(fastDiskRun().Record)
	r := fastDiskRun()
	r.Files[0].FS = "fuse.sshfs"
	res := Analyze(r.Record)
	if res.Cold || res.Verdict.ColdBy.ReadBytes != 0 || res.RecurringNS != 30e6 {
		t.Fatalf("FUSE: cold %v, %+v, recurring %d ns", res.Cold, res.Verdict.ColdBy, res.RecurringNS)
	}
	if res.WarmEstimateNS != local.WarmEstimateNS+30e6 {
		t.Errorf("warm estimate %d, want the local run's %d + 30 ms", res.WarmEstimateNS, local.WarmEstimateNS)
	}
	if !local.Cold || local.RecurringNS != 0 {
		t.Errorf("ext4: cold %v, recurring %d", local.Cold, local.RecurringNS)
	}
}

// TestCauseMarksFilesNoneOfWhosePagesMissed: the verdict's disk cause says
// when its files only waited on pages already being read in, and not when
// any of them missed.
func TestCauseMarksFilesNoneOfWhosePagesMissed(t *testing.T) {
	row := &Row{Category: DiskRead, NS: 50, Files: []FileEvidence{
		{ID: 1, Path: "/usr/bin/dd", NS: 38},
		{ID: 2, Path: "/lib/libc.so.6", NS: 12},
	}}
	if c := cause(row); !c.NoneMissed || c.Names[0] != "/usr/bin/dd" || c.OtherFiles != 1 {
		t.Errorf("waits only: %+v", c)
	}
	row.Files[1].PagesMissed = 3
	if c := cause(row); c.NoneMissed {
		t.Errorf("a file missed, yet none_missed: %+v", c)
	}
}

// directReadRun: 1 s of which each 100 ms slice waits 70 ms on direct
// reads of one file and computes 30 ms; no page of it goes through the
// page cache.
func directReadRun() rec {
	r := newRec(1000).proc(1, 0, "dd")
	r.Files = append(r.Files, record.File{ID: 0, Path: "/data/shard.bin", SizeBytes: 64 << 20, DirectBytes: 64 << 20,
		IOWaitNS: 700 * ms, DirectWaitNS: 700 * ms})
	for end := int64(100); end <= 1000; end += 100 {
		r.Samples = append(r.Samples, record.Sample{EndNS: end * ms,
			Threads: []record.ThreadDelta{{TID: 1, PID: 1, CPUNS: 30 * ms, IOWaitNS: 70 * ms}},
			Files:   []record.FileDelta{{File: 0, IOWaitNS: 70 * ms, DirectWaitNS: 70 * ms}}})
	}
	return r
}

// TestWarmVerdictNamesDiskTimeARerunRepeats: a run that spends most of
// its time on direct reads is warm (a rerun reads them again), and its
// verdict names that time and its file rather than its CPU alone.
func TestWarmVerdictNamesDiskTimeARerunRepeats(t *testing.T) {
	res := Analyze(directReadRun().Record)
	v := res.Verdict
	if v.Kind != VerdictWarm || res.RecurringNS != 700*ms {
		t.Fatalf("kind %s, recurring %d ns: want warm with 700 ms a rerun repeats", v.Kind, res.RecurringNS)
	}
	if len(v.Causes) != 2 {
		t.Fatalf("causes %+v: want the direct reads and the CPU", v.Causes)
	}
	c := v.Causes[0]
	if c.Category != DiskRead || !c.Recurring || c.NS != 700*ms || c.Pct != 70 || len(c.Names) != 1 || c.Names[0] != "/data/shard.bin" {
		t.Errorf("first cause %+v: want 70%% disk reads a rerun repeats, of /data/shard.bin", c)
	}
	if v.Causes[1].Category != CPU || v.Causes[1].Recurring {
		t.Errorf("second cause %+v: want CPU", v.Causes[1])
	}

	// The same waits with no file behind them: I/O outside the page cache.
	r := directReadRun()
	r.Files = nil
	for i := range r.Samples {
		r.Samples[i].Files = nil
	}
	v = Analyze(r.Record).Verdict
	if len(v.Causes) == 0 || !v.Causes[0].Recurring || len(v.Causes[0].Names) != 1 || v.Causes[0].Names[0] != OutsidePageCache {
		t.Errorf("causes %+v: want I/O outside the page cache first", v.Causes)
	}

	// A little of it is no cause of its own beside a run's CPU.
	r = fastDiskRun()
	r.Files[0].FS = "fuse.sshfs"
	v = Analyze(r.Record).Verdict
	if len(v.Causes) != 1 || v.Causes[0].Category != CPU {
		t.Errorf("30 ms of FUSE reads in 5 s: causes %+v, want CPU alone", v.Causes)
	}
}
