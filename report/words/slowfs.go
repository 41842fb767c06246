package words

import (
	"fmt"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
)

// slowFSFix is what to do about a file filled by many small requests.
func slowFSFix(s advice.SlowFSRead) string {
	if s.Faults {
		return "read it eagerly (one sequential read, vLLM: --safetensors-load-strategy eager) instead of mapping it, or copy it to local disk"
	}
	return "read it in large sequential chunks, or copy it to local disk"
}

// slowFSSentence: "/m/w.bin on fuse was filled by 256 faults of ~4.0
// KiB at 2.0 ms each (2.1 MB/s); this run read /m/a.bin on the same
// filesystem sequentially at 52.4 MB/s, 25× faster: read it eagerly …".
func slowFSSentence(s advice.SlowFSRead) string {
	how := "reads"
	if s.Faults {
		how = "faults"
	}
	out := fmt.Sprintf("%s on %s was filled by %d %s of ~%s at %s each (%.1f MB/s)",
		s.Path, s.FS, s.Fills, how, format.Bytes(s.FillBytes), perMiss(s.FillNS), s.MBps)
	if s.SequentialMBps > 0 {
		out += fmt.Sprintf("; this run read %s on the same filesystem sequentially at %.1f MB/s, %.0f× faster", s.SequentialPath, s.SequentialMBps, s.Speedup)
	}
	return out + ": " + slowFSFix(s)
}

// slowFSAction and its evidence: the evidence stops before the fix,
// which the action says.
func slowFSAction(s advice.SlowFSRead) (action, evidence string) {
	full := slowFSSentence(s)
	return s.Path + ": " + slowFSFix(s), full[:len(full)-len(": "+slowFSFix(s))]
}

// perMiss says the time of one miss or fill: "2.0 ms", "850 µs".
func perMiss(ns int64) string {
	if ns >= 1e6 {
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.0f µs", float64(ns)/1e3)
}
