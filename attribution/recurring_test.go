package attribution

import "testing"

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
