package compare_test

import (
	"testing"

	"github.com/coldtrace/coldtrace/attribution/compare"
)

// TestDiffDirectReadNotCached: a file both runs read with direct I/O
// had no page from disk through the page cache either time, yet was read
// from disk both times: the diff says so instead of "cached in both".
func TestDiffDirectReadNotCached(t *testing.T) {
	a, ra := fixture(t, "truth-warm")
	b, rb := fixture(t, "truth-warm")
	const size = 8 << 20
	for _, r := range []int{0, 1} {
		rec := a
		if r == 1 {
			rec = b
		}
		f := &rec.Files[0]
		f.PagesMissed, f.BytesFromDisk, f.DirectBytes, f.DirectWaitNS = 0, 0, size, f.IOWaitNS
	}
	d := compare.New(a, b, ra, rb)
	var found bool
	for _, f := range d.Files {
		if f.Path != a.Files[0].Path {
			continue
		}
		found = true
		if f.Change != compare.FileDirectInBoth || f.ADirectBytes != size || f.BDirectBytes != size {
			t.Errorf("%s: change %q, direct bytes %d and %d; want %q, %d each", f.Path, f.Change, f.ADirectBytes, f.BDirectBytes,
				compare.FileDirectInBoth, size)
		}
	}
	if !found {
		t.Fatalf("%s not among the diff's files", a.Files[0].Path)
	}
}
