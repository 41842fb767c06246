package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// damonAdmin is DAMON's sysfs interface.
const damonAdmin = "/sys/kernel/mm/damon/admin/kdamonds"

// FileReclaim counts the pages the machine has reclaimed since it was
// called: pgsteal_file in /proc/vmstat (kswapd and direct reclaim) plus
// what DAMON's pageout schemes reclaimed, which this kernel does not
// count there (reclaim_pages, as MADV_PAGEOUT, counts no pgsteal; seen
// here: 256 pages of a file just read gone, pgsteal_file unmoved).
// Pages a test just brought into the page cache can be taken back
// within a second on these VMs; a test that finds fewer cached than it
// expects can check the shortfall against it. It skips the test when
// /proc/vmstat has no such counter.
func FileReclaim(t testing.TB) func() uint64 {
	t.Helper()
	start, ok := pgstealFile()
	if !ok {
		t.Skip("/proc/vmstat has no pgsteal_file: reclaim cannot be told from a wrong count")
	}
	damonStart := damonPagedOut()
	return func() uint64 {
		now, _ := pgstealFile()
		damon := damonPagedOut()
		return now - min(start, now) + damon - min(damonStart, damon)
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

// damonPagedOut is the pages DAMON's running pageout schemes have
// reclaimed so far (their sz_applied, refreshed first: DAMON updates
// it only when asked). Without DAMON, or its sysfs (not root), it is 0.
func damonPagedOut() uint64 {
	kdamonds, _ := filepath.Glob(filepath.Join(damonAdmin, "[0-9]*"))
	var bytes uint64
	for _, k := range kdamonds {
		state, err := os.ReadFile(filepath.Join(k, "state"))
		if err != nil || strings.TrimSpace(string(state)) != "on" {
			continue
		}
		if os.WriteFile(filepath.Join(k, "state"), []byte("update_schemes_stats"), 0) != nil {
			continue
		}
		schemes, _ := filepath.Glob(filepath.Join(k, "contexts", "[0-9]*", "schemes", "[0-9]*"))
		for _, s := range schemes {
			if action, err := os.ReadFile(filepath.Join(s, "action")); err != nil || strings.TrimSpace(string(action)) != "pageout" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(s, "stats", "sz_applied"))
			if err != nil {
				continue
			}
			if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				bytes += n
			}
		}
	}
	return bytes / uint64(os.Getpagesize())
}
