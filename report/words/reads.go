package words

import (
	"fmt"
	"path"

	"github.com/coldtrace/coldtrace/attribution/advice"
)

// readHow says how a file's misses came: "read" or "page faults".
func readHow(f advice.FileRead) string {
	if f.FaultBytes > f.ReadBytes {
		return "page faults"
	}
	return "read"
}

// readFix is what to do about a file read out of order.
func readFix(f advice.FileRead) string {
	if readHow(f) == "page faults" {
		return "pre-read it (`coldtrace prefetch`) or disable mmap"
	}
	return "read it in large sequential chunks"
}

// readSentence: "model.gguf was read by 16 k random misses (page
// faults) at 16.78 MB/s, 244 µs per miss, on nfs4 (a network
// filesystem); …", or, read out of order well below the device's
// sequential rate, that rate and the fix.
func readSentence(f advice.FileRead) string {
	name := path.Base(f.Path)
	if f.Unordered {
		what := "reads"
		if readHow(f) == "page faults" {
			what = "page faults"
		}
		return fmt.Sprintf("%s was read by %s %s %s at %.2f MB/s (%s per miss); read sequentially it ran at %.0f MB/s: %s",
			name, compactCount(f.Misses), f.Order, what, f.MBps, perMiss(f.MissNS), f.BaselineMBps, readFix(f))
	}
	order := f.Order
	if order == "" {
		order = "few"
	}
	out := fmt.Sprintf("%s was read by %s %s misses (%s) at %.2f MB/s, %s per miss",
		name, compactCount(f.Misses), order, readHow(f), f.MBps, perMiss(f.MissNS))
	if f.FS != "" {
		out += ", on " + f.FS
		if f.Network {
			out += " (a network filesystem)"
		}
	}
	if f.BaselineMBps > 0 {
		out += fmt.Sprintf("; the best sequential read on that device ran at %.0f MB/s", f.BaselineMBps)
	}
	return out
}

// compactCount says a count to two or three figures: "950", "16 k",
// "1.2 M" (a sentence's scale, where report/format.Count would print
// every digit).
func compactCount(n uint64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1f M", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.0f k", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
