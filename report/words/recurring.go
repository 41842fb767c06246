package words

import (
	"fmt"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
)

// recurringSentence: "/m/w.bin was read from fuse (4.0 MiB in 0.50 s,
// 1024 page misses at 488 µs each, 8.4 MB/s) and is read again on
// every run: …".
func recurringSentence(r advice.RecurringRead) string {
	out := fmt.Sprintf("%s was read from %s (%s in %s", r.Path, r.FS, format.Bytes(r.Bytes), hundredths(r.FillNS))
	if r.Misses > 0 {
		out += fmt.Sprintf(", %d page misses at %s each", r.Misses, perMiss(r.FillNS/int64(r.Misses)))
	}
	return out + fmt.Sprintf(", %.1f MB/s) and is read again on every run: FUSE drops its cached pages at open "+
		"unless the filesystem is mounted with kernel_cache; read it eagerly once, or copy it to local disk", mbps(r.Bytes, r.FillNS))
}

// mbps is bytes over ns in MB/s; 0 without time.
func mbps(bytes uint64, ns int64) float64 {
	if ns <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / (float64(ns) / 1e9)
}
