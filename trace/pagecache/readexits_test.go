package pagecache_test

import (
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/pagecache"
)

// On a kernel that refuses task works, the syscall exit tracepoint that
// ends fills goes on at the first fill, not before: a run that fills
// nothing from disk never puts the machine's other processes on the
// syscall slow path, and one that reads a cold file after a pause gets
// it then. The record says when.
func TestReadExitsGoOnAtTheFirstFill(t *testing.T) {
	testenv.RequireTracing(t)
	taskWorks, err := pagecache.TaskWorksAllowed(nil)
	if err != nil {
		t.Fatal(err)
	}
	if taskWorks {
		t.Skip("this kernel lets a task work end each fill: no read exits to attach")
	}
	path := diskFile(t)
	missed := func(rec *record.Record) (files []string) {
		for _, f := range rec.Files {
			if f.PagesMissed > 0 {
				files = append(files, f.Path)
			}
		}
		return files
	}

	makeWarm(t, path)
	warm := traceRun(t, []string{"cat", path})
	if warm.FillEnd != record.FillEndReadExit {
		t.Errorf("warm run: fill_end %q", warm.FillEnd)
	}
	// A binary or library DAMON paged out fills on its exec: then the
	// exits may go on, and only then.
	if m := missed(warm); warm.ReadExitsFromNS != nil && len(m) == 0 {
		t.Errorf("warm run: read exits on at %d ns with no page missed", *warm.ReadExitsFromNS)
	} else if warm.ReadExitsFromNS != nil {
		t.Logf("warm run: read exits on at %d ns for %q", *warm.ReadExitsFromNS, m)
	}

	const pause = 300 * time.Millisecond
	makeCold(t, path)
	cold := traceRun(t, []string{"sh", "-c", `sleep 0.3; exec cat "$1"`, "sh", path})
	from := cold.ReadExitsFromNS
	if from == nil || *from > cold.WallNS {
		t.Fatalf("cold run: read exits from %v in a %d ns run, want on while it read", from, cold.WallNS)
	}
	m := missed(cold)
	if len(m) == 1 && m[0] == path && time.Duration(*from) < pause {
		t.Errorf("cold run: read exits on at %v, before the cold read that followed a %v pause (files missed: %q)", time.Duration(*from), pause, m)
	}
	t.Logf("cold run: read exits on at %v of %v; files missed %q", time.Duration(*from), time.Duration(cold.WallNS), m)
}
