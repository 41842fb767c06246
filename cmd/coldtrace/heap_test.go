package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestCollectorOffWhileLoading: the collector is off while the sensors
// load, with a memory limit as the backstop, and back at 50% with no
// limit once they are loaded; a user's GOGC or GOMEMLIMIT is left alone.
func TestCollectorOffWhileLoading(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	none := func(string) string { return "" }
	keepHeapNearLive(none)
	settle := looseHeapWhileLoading(none)
	if pct, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1); pct != -1 || limit != loadHeapLimit {
		t.Errorf("while loading: GC percent %d, memory limit %d; want -1 and %d", pct, limit, loadHeapLimit)
	}
	settle()
	if pct, limit := debug.SetGCPercent(50), debug.SetMemoryLimit(-1); pct != 50 || limit != math.MaxInt64 {
		t.Errorf("once loaded: GC percent %d, memory limit %d; want 50 and none", pct, limit)
	}

	user := func(k string) string {
		if k == "GOGC" {
			return "200"
		}
		return ""
	}
	debug.SetGCPercent(200)
	looseHeapWhileLoading(user)()
	if pct := debug.SetGCPercent(200); pct != 200 {
		t.Errorf("GOGC=200 set by the user: GC percent %d during and after the load", pct)
	}
}
