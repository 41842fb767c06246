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
