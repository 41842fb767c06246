package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/pagecache"
)

// A cold read, traced as it comes and with --no-read-exits: each record
// says how its fills ended (and the default one when its read exits went
// on), the opted-out one warns what it lacks, both still charge the
// read's disk time to the file, the read exits put each read's copy of
// its last pages in its fill CPU, and diff says when the two were
// measured differently (only where the kernel refuses task works:
// elsewhere the option changes nothing).
func TestFillEndRecordedAndReadExitsOptOut(t *testing.T) {
	requireTracing(t)
	if _, err := exec.LookPath("dd"); err != nil {
		t.Skip("dd is not installed")
	}
	taskWorks, err := pagecache.TaskWorksAllowed(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := e2eutil.DiskDir(t)
	model := filepath.Join(dir, "model.bin")
	writeModel(t, model, 64*mib)
	var recs []string
	fillCPU := map[string]int64{}
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"default", nil, map[bool]string{true: record.FillEndTaskWork, false: record.FillEndReadExit}[taskWorks]},
		{"no-read-exits", []string{"--no-read-exits"}, map[bool]string{true: record.FillEndTaskWork, false: record.FillEndNextLook}[taskWorks]},
	} {
		residency(t, "evict", model)
		rec := filepath.Join(dir, c.name+".rec")
		// dd without an rseq area: its fills need the read exits
		// whether or not its reads wait for the disk (a read that
		// waits ends at its return by rseq either way).
		args := append(append([]string{"-q", "--no-gpu", "-o", rec}, c.flags...), "--",
			"env", "GLIBC_TUNABLES=glibc.pthread.rseq=0", "dd", "if="+model, "of=/dev/null", "bs=1M")
		if code, _, stderr := coldtrace(t, nil, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		recs = append(recs, rec)
		r := readRecord(t, rec)
		if r.FillEnd != c.want {
			t.Errorf("%s: fill_end %q, want %q", c.name, r.FillEnd, c.want)
		}
		warned := strings.Contains(strings.Join(r.Warnings, "\n"), "--no-read-exits")
		if warned != (c.want == record.FillEndNextLook) {
			t.Errorf("%s (fill_end %s): warnings %q", c.name, r.FillEnd, r.Warnings)
		}
		var f *record.File
		for i := range r.Files {
			if r.Files[i].Path == model {
				f = &r.Files[i]
			}
		}
		if f == nil || f.PagesMissed == 0 || f.IOWaitNS+f.MissCPUNS+f.FillWaitNS <= 0 {
			t.Errorf("%s: the cold read's file: %+v", c.name, f)
			continue
		}
		if exits := r.ReadExitsFromNS; (exits != nil) != (c.want == record.FillEndReadExit) || exits != nil && *exits > r.WallNS {
			t.Errorf("%s (fill_end %s): read exits from %v in a %d ns run", c.name, r.FillEnd, exits, r.WallNS)
		}
		fillCPU[c.name] = f.MissCPUNS
		t.Logf("%s: fill_end %s, %d pages missed, io wait %.1f ms, fill CPU %.1f ms, fill wait %.1f ms in a %.1f ms run",
			c.name, r.FillEnd, f.PagesMissed, ms(f.IOWaitNS), ms(f.MissCPUNS), ms(f.FillWaitNS), ms(r.WallNS))
	}
	// Measured here: 11.8 ms of fill CPU with the read exits, 2.3 ms
	// without.
	if !taskWorks && fillCPU["default"] <= fillCPU["no-read-exits"] {
		t.Errorf("fill CPU %.1f ms with the read exits, %.1f ms without: the copies of the reads' last pages are not in it",
			ms(fillCPU["default"]), ms(fillCPU["no-read-exits"]))
	}
	code, out, stderr := coldtrace(t, nil, "diff", recs[0], recs[1])
	if code != 0 {
		t.Fatalf("diff: exit %d: %s", code, stderr)
	}
	if got := strings.Contains(out+stderr, "ended fills differently"); got == taskWorks {
		t.Errorf("task works %v: diff warned of fills ended differently: %v\n%s%s", taskWorks, got, out, stderr)
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
