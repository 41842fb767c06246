package words

import (
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/report/format"
)

// Comparison says the verdict of a comparison of two runs: "B was 3.3s
// faster (5.5s → 2.2s): 1.8s less disk reads (model.bin was cached), …".
func Comparison(v compare.Verdict) string {
	walls := fmt.Sprintf("%s → %s", format.Duration(v.AWallNS), format.Duration(v.BWallNS))
	if v.Kind == compare.Same {
		return withMachine(fmt.Sprintf("A and B took about as long (%s).", walls), v)
	}
	word := "slower"
	if v.Kind == compare.Faster {
		word = "faster"
	}
	s := fmt.Sprintf("B was %s %s (%s)", format.Duration(abs(v.DeltaNS)), word, walls)
	if len(v.With) > 0 {
		s += ": " + changes(v.With)
	}
	if len(v.Against) > 0 {
		s += "; but " + changes(v.Against)
	}
	return withMachine(s+".", v)
}

func changes(cs []compare.Change) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		more := "more"
		if c.Less() {
			more = "less"
		}
		parts[i] = fmt.Sprintf("%s %s %s%s", format.Duration(abs(c.DeltaNS)), more, c.Category.Label(), changeDetail(c))
	}
	return strings.Join(parts, ", ")
}

// changeDetail names the evidence behind a change, in parentheses.
func changeDetail(c compare.Change) string {
	less := c.Less()
	switch c.Category {
	case attribution.DiskRead:
		if len(c.Files) > 0 {
			verb := "not cached"
			if less {
				verb = "cached"
			}
			return " (" + format.Files(c.Files) + " " + wasWere(len(c.Files)) + " " + verb + ")"
		}
		if c.ADirectBytes > 0 || c.BDirectBytes > 0 {
			return directDetail(c)
		}
		if c.ABytesFromDisk != c.BBytesFromDisk {
			return fmt.Sprintf(" (%s read from disk instead of %s)", format.Bytes(c.BBytesFromDisk), format.Bytes(c.ABytesFromDisk))
		}
	case attribution.JITCompile:
		var parts []string
		for _, k := range c.Caches {
			if less {
				parts = append(parts, fmt.Sprintf("%s %s %s", format.Count(k.Count), k.Name,
					format.Plural(k.Count, "kernel was a cache hit", "kernels were cache hits")))
			} else {
				parts = append(parts, fmt.Sprintf("%s more %s cache %s", format.Count(k.Count), k.Name,
					format.Plural(k.Count, "miss", "misses")))
			}
		}
		for _, x := range c.Compilers {
			parts = append(parts, fmt.Sprintf("%s ran %s instead of %s", x.Name, format.Times(x.BRuns), format.Times(x.ARuns)))
		}
		if len(parts) > 0 {
			return " (" + strings.Join(parts, ", ") + ")"
		}
	case attribution.Download:
		switch n := len(c.Downloads); {
		case n == 1:
			x := c.Downloads[0]
			what := fmt.Sprintf("%s, %s in %s", format.Path(x.Name, format.PathWidth), format.Bytes(x.Bytes), format.Duration(x.NS))
			switch {
			case !less:
				return " (B downloaded " + what + ")"
			case x.Cache != "":
				return " (B did not download " + what + ": it was in the " + x.Cache + " cache)"
			}
			return " (B did not download " + what + ")"
		case n > 1:
			names := make([]string, n)
			for i, x := range c.Downloads {
				names[i] = x.Name
			}
			if less {
				return " (" + format.Files(names) + " were already downloaded)"
			}
			return " (" + format.Files(names) + " were downloaded)"
		}
	case attribution.GPUCompute:
		if c.GPU != nil {
			return fmt.Sprintf(" (mean utilization %.0f%% → %.0f%%)", c.GPU.AUtilMeanPct, c.GPU.BUtilMeanPct)
		}
	}
	return ""
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// directDetail names a disk change of runs that read with direct I/O:
// those bytes come from disk in every run, so "0 B read from disk"
// alone would hide them.
func directDetail(c compare.Change) string {
	direct := fmt.Sprintf("%s read with direct I/O in both", format.Bytes(c.BDirectBytes))
	if c.ADirectBytes != c.BDirectBytes {
		direct = fmt.Sprintf("%s read with direct I/O instead of %s", format.Bytes(c.BDirectBytes), format.Bytes(c.ADirectBytes))
	}
	if c.ABytesFromDisk != c.BBytesFromDisk {
		return fmt.Sprintf(" (%s; %s through the page cache instead of %s)", direct, format.Bytes(c.BBytesFromDisk), format.Bytes(c.ABytesFromDisk))
	}
	return " (" + direct + ")"
}
