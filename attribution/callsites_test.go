package attribution_test

import (
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
)

// TestFileTimeSplitsOverStacksByThreadTime: the file's part of the disk
// row is split over its stacks in proportion to their thread time, with
// the thread time beside it, and each call site is named by its
// innermost frame of the user's code.
func TestFileTimeSplitsOverStacksByThreadTime(t *testing.T) {
	r := stackedRead(3e9)
	res := attribution.Analyze(r)
	row := res.Row(attribution.DiskRead)
	if row == nil || len(row.Files) == 0 {
		t.Fatalf("no disk row: %+v", res.Breakdown)
	}
	fe := row.Files[0]
	if len(fe.Stacks) != 2 || fe.Stacks[0].Stack != 1 || fe.Stacks[0].ThreadNS != 3e9 || fe.Stacks[1].ThreadNS != 1e9 {
		t.Fatalf("stacks %+v", fe.Stacks)
	}
	if got := fe.Stacks[0].NS + fe.Stacks[1].NS; got != fe.NS || fe.Stacks[0].NS != 3*fe.Stacks[1].NS {
		t.Errorf("file %d ns split %d + %d", fe.NS, fe.Stacks[0].NS, fe.Stacks[1].NS)
	}
	sites := attribution.CallSiteTimes(r, res)
	if len(sites) != 2 || sites[0].Site != "load (main.py:12)" || sites[1].Site != "load_lora (main.py:20)" ||
		sites[0].Category != attribution.DiskRead || sites[0].NS != fe.Stacks[0].NS {
		t.Errorf("call sites %+v", sites)
	}
}
