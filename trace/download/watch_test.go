package download

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestUnlistedBodyIsNotSeen: a body no file shows was kept in memory only
// when its process's open files were listed while it arrived; otherwise a
// tmpfs file written and closed between two listings may hold it, and the
// destination was not seen.
func TestUnlistedBodyIsNotSeen(t *testing.T) {
	c := part(1, 10, 100, 160, 8*mib)
	var l listings
	for _, tc := range []struct {
		name   string
		listed []int64 // listing times of pid 10, ms
		want   string
	}{
		{"never listed", nil, record.DestNotSeen},
		{"listed before only", []int64{50}, record.DestNotSeen},
		{"listed after only", []int64{400}, record.DestNotSeen},
		{"listed while receiving", []int64{130}, record.DestMemory},
		{"span across the download", []int64{90, 95, 100, 105}, record.DestMemory},
	} {
		l = listings{}
		for _, at := range tc.listed {
			l.add(10, at*ms)
		}
		got := Build([]Conn{c}, nil, Env{IntervalNS: 100 * ms, Listed: l.during})
		if len(got) != 1 || got[0].Destination != tc.want {
			t.Errorf("%s: got %+v, want one download, destination %q", tc.name, got, tc.want)
		}
	}
}

// TestListingsMergeCloseTicks: listings a few ticks apart make one span;
// a gap makes another, and a time inside the gap is not listed.
func TestListingsMergeCloseTicks(t *testing.T) {
	l := listings{}
	for _, at := range []int64{0, 5, 10, 15, 200, 205} {
		l.add(7, at*ms)
	}
	if len(l[7]) != 2 {
		t.Fatalf("spans %v, want 2", l[7])
	}
	if !l.during(7, 12*ms, 13*ms) || l.during(7, 50*ms, 150*ms) || !l.during(7, 150*ms, 201*ms) || l.during(8, 0, 300*ms) {
		t.Errorf("spans %v answer wrongly", l[7])
	}
}
