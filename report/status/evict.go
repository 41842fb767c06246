package status

import (
	"fmt"
	"io"
	"strings"

	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency"
)

// WriteEvictText says what `coldtrace evict` dropped, and why pages stayed.
func WriteEvictText(w io.Writer, done []residency.Evicted) error {
	var b strings.Builder
	unknown := 0
	for _, e := range done {
		if !e.Known {
			unknown++
		}
	}
	fmt.Fprintf(&b, "coldtrace evict: %s\n", evictVerdict(done))
	if unknown > 0 {
		fmt.Fprintf(&b, "  %s asked to go, but this user may not see how much went\n", counted(int64(unknown), "file", "files"))
	}
	for _, e := range done {
		switch {
		case !e.Known:
			Line(&b, "  %s: dropped, not verified (%s)", e.Path, e.Unknown)
		case e.KeptPages > 0:
			// keptWhy names other processes by their comm: escaped with
			// the rest of the line.
			Line(&b, "  %s: %s dropped, %d pages kept: %s", e.Path, format.Bytes(uint64(e.DroppedBytes)), e.KeptPages, keptWhy(e))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// evictVerdict is evict's one-line answer: "1 file (128.0 MiB), 128.0 MiB
// dropped from the page cache".
func evictVerdict(done []residency.Evicted) string {
	var dropped, size int64
	for _, e := range done {
		dropped += e.DroppedBytes
		size += e.Size
	}
	return fmt.Sprintf("%s (%s), %s dropped from the page cache", counted(int64(len(done)), "file", "files"), format.Bytes(uint64(size)), format.Bytes(uint64(dropped)))
}

// keptWhy says why pages stayed: dirty, under writeback, or mapped.
func keptWhy(e residency.Evicted) string {
	var why []string
	if e.After.Dirty > 0 {
		why = append(why, fmt.Sprintf("%d dirty", e.After.Dirty))
	}
	if e.After.Writeback > 0 {
		why = append(why, fmt.Sprintf("%d under writeback", e.After.Writeback))
	}
	if rest := e.KeptPages - min(e.KeptPages, e.After.Dirty+e.After.Writeback); rest > 0 {
		if len(e.Mappers) == 0 {
			why = append(why, fmt.Sprintf("%d mapped or in use (by no process this user may inspect)", rest))
		} else {
			var who []string
			for _, m := range e.Mappers {
				who = append(who, fmt.Sprintf("%s (pid %d)", m.Comm, m.PID))
			}
			why = append(why, fmt.Sprintf("%d mapped by %s", rest, strings.Join(who, ", ")))
		}
	}
	return strings.Join(why, ", ")
}

// EvictSchema names `coldtrace evict --json`.
const EvictSchema = "coldtrace.evict/v1"

// EvictDocument is `coldtrace evict --json`.
type EvictDocument struct {
	Schema string `json:"schema"`
	// Verdict is the one-line answer, the text's first line.
	Verdict string              `json:"verdict"`
	Files   []residency.Evicted `json:"files"`
}

// NewEvictDocument is what was evicted as the --json document.
func NewEvictDocument(done []residency.Evicted) EvictDocument {
	return EvictDocument{Schema: EvictSchema, Verdict: evictVerdict(done), Files: done}
}
