package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// SummaryCache is one kernel/JIT cache in the JSON summary's "caches".
type SummaryCache struct {
	Name           string `json:"name"`
	Root           string `json:"root"`
	Lookups        uint64 `json:"lookups"`
	Hits           uint64 `json:"hits"`
	Misses         uint64 `json:"misses"`
	EntriesWritten uint64 `json:"entries_written"`
	BytesWritten   uint64 `json:"bytes_written"`
	CompileNS      int64  `json:"compile_ns"`
}

// SummaryCompiler is one compiler program in the JSON summary's
// "compilers".
type SummaryCompiler struct {
	Name   string `json:"name"`
	Runs   int    `json:"runs"`
	WallNS int64  `json:"wall_ns"`
	CPUNS  int64  `json:"cpu_ns"`
}

// SummaryCaches returns the record's caches for the JSON summary, in the
// record's order (most compile time first); empty, not nil, when there
// are none.
func SummaryCaches(r *record.Record) []SummaryCache {
	out := []SummaryCache{}
	if r == nil || r.JIT == nil {
		return out
	}
	for _, c := range r.JIT.Caches {
		out = append(out, SummaryCache{Name: c.Name, Root: c.Root, Lookups: c.Lookups, Hits: c.Hits,
			Misses: c.Misses, EntriesWritten: c.EntriesWritten, BytesWritten: c.BytesWritten, CompileNS: c.CompileNS})
	}
	return out
}

// SummaryCompilers returns the record's compilers for the JSON summary
// (most wall time first); empty, not nil, when there are none.
func SummaryCompilers(r *record.Record) []SummaryCompiler {
	out := []SummaryCompiler{}
	if r == nil || r.JIT == nil {
		return out
	}
	for _, c := range r.JIT.Compilers {
		out = append(out, SummaryCompiler{Name: c.Name, Runs: c.Runs, WallNS: c.WallNS, CPUNS: c.CPUNS})
	}
	return out
}

// cacheRoot is how a root reads in the text summary.
func cacheRoot(c record.Cache) string {
	if d, ok := strings.CutPrefix(c.Root, "**/"); ok {
		return "(every " + d + " directory)"
	}
	return c.Root
}

// WriteJITText writes the JIT section of the terminal summary: each cache
// with its lookups, hits, misses, writes and compile time, then its
// health, the compilers run as subprocesses and the probed compile entry
// points. It writes nothing when the record has no JIT evidence.
func WriteJITText(w io.Writer, r *record.Record) error {
	if r == nil || r.JIT == nil {
		return nil
	}
	j := r.JIT
	if len(j.Caches) == 0 && len(j.Compilers) == 0 && len(j.Uprobes) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("JIT and kernel caches\n")
	if len(j.Caches) > 0 {
		rows := [][]string{{"cache", "root", "lookups", "hits", "misses", "written", "bytes", "compile"}}
		for _, c := range j.Caches {
			rows = append(rows, []string{c.Name, cacheRoot(c), fmt.Sprint(c.Lookups), fmt.Sprint(c.Hits),
				fmt.Sprint(c.Misses), fmt.Sprint(c.EntriesWritten), Bytes(c.BytesWritten), Duration(c.CompileNS)})
		}
		writeTable(&b, rows, 2)
		for _, c := range j.Caches {
			if h := cacheHealth(c); h != "" {
				fmt.Fprintf(&b, "  %s: %s\n", c.Name, h)
			}
		}
	}
	if len(j.Compilers) > 0 {
		rows := [][]string{{"compiler", "runs", "wall", "cpu"}}
		for _, c := range j.Compilers {
			rows = append(rows, []string{c.Name, fmt.Sprint(c.Runs), Duration(c.WallNS), Duration(c.CPUNS)})
		}
		writeTable(&b, rows, 1)
	}
	for _, u := range j.Uprobes {
		if u.Error != "" {
			fmt.Fprintf(&b, "  uprobe %s: not attached (%s)\n", u.Name, u.Error)
			continue
		}
		fmt.Fprintf(&b, "  uprobe %s: %d calls, %s (%s on CPU)\n", u.Name, u.Calls, Duration(u.TotalNS), Duration(u.CPUNS))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable writes rows indented by two spaces, the first left columns
// aligned left and the others right.
func writeTable(b *strings.Builder, rows [][]string, left int) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			b.WriteString("  ")
			switch {
			case i >= left:
				b.WriteString(pad + c)
			case i < len(r)-1:
				b.WriteString(c + pad)
			default:
				b.WriteString(c)
			}
		}
		b.WriteString("\n")
	}
}

// cacheHealth is one line on a cache's filesystem, size and switches;
// empty when there is nothing worth saying.
func cacheHealth(c record.Cache) string {
	var parts []string
	switch {
	case c.Missing:
		parts = append(parts, "directory missing at the end of the run")
	case c.FS != "":
		s := "on " + c.FS
		if c.Volatile {
			s += " (emptied on reboot: the first run after a boot starts cold)"
		}
		parts = append(parts, s)
	}
	if c.SizeBytes > 0 || c.Files > 0 {
		s := fmt.Sprintf("%s in %d files", Bytes(uint64(c.SizeBytes)), c.Files)
		if c.SizeCapped {
			s = "at least " + s
		}
		if c.LimitBytes > 0 {
			s += fmt.Sprintf(" of a %s limit", Bytes(uint64(c.LimitBytes)))
			if c.SizeBytes >= c.LimitBytes*9/10 {
				s += " (nearly full: entries will be evicted)"
			}
		}
		parts = append(parts, s)
	}
	if c.Disabled != "" {
		for _, sw := range strings.Split(c.Disabled, ", ") {
			line := "disabled by " + sw
			for _, n := range c.Notes {
				if strings.HasPrefix(n, sw+":") {
					line = n
				}
			}
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}
