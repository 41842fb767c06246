package testenv

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// FileReclaim counts the file pages the machine has reclaimed since it
// was called (pgsteal_file in /proc/vmstat: kswapd, direct reclaim and
// DAMON's pageout alike). Pages a test just brought into the page cache
// can be taken back within a second on these VMs; a test that finds
// fewer cached than it expects can check the shortfall against it. It
// skips the test when /proc/vmstat has no such counter.
func FileReclaim(t testing.TB) func() uint64 {
	t.Helper()
	start, ok := pgstealFile()
	if !ok {
		t.Skip("/proc/vmstat has no pgsteal_file: reclaim cannot be told from a wrong count")
	}
	return func() uint64 {
		now, _ := pgstealFile()
		return now - min(start, now)
	}
}

func pgstealFile() (uint64, bool) {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "pgsteal_file "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
