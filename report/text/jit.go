package text

import (
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// cacheRoot is how a root reads in the text summary.
func cacheRoot(c record.Cache) string {
	if d, ok := strings.CutPrefix(c.Root, "**/"); ok {
		return "(every " + d + " directory)"
	}
	return c.Root
}

// jitSection is the JIT section of the terminal summary: each cache with
// its lookups, hits, misses, writes and compile time, then its health,
// the compilers run as subprocesses and the probed compile entry points.
// It is empty when the record has no JIT evidence.
func jitSection(r *record.Record) string {
	if r == nil || r.JIT == nil {
		return ""
	}
	j := r.JIT
	if len(j.Caches) == 0 && len(j.Compilers) == 0 && len(j.Uprobes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("JIT and kernel caches\n")
	if len(j.Caches) > 0 {
		rows := [][]string{{"cache", "root", "lookups", "hits", "misses", "written", "bytes", "compile"}}
		for _, c := range j.Caches {
			rows = append(rows, []string{format.Escape(c.Name), format.Escape(cacheRoot(c)), fmt.Sprint(c.Lookups), fmt.Sprint(c.Hits),
				fmt.Sprint(c.Misses), fmt.Sprint(c.EntriesWritten), format.Bytes(c.BytesWritten), format.Duration(c.CompileNS)})
		}
		writeTable(&b, rows, 2)
		for _, c := range j.Caches {
			if h := cacheHealth(c); h != "" {
				fmt.Fprintf(&b, "  %s: %s\n", format.Escape(c.Name), format.Escape(h))
			}
		}
	}
	if len(j.Compilers) > 0 {
		rows := [][]string{{"compiler", "runs", "wall", "cpu"}}
		for _, c := range j.Compilers {
			rows = append(rows, []string{format.Escape(c.Name), fmt.Sprint(c.Runs), format.Duration(c.WallNS), format.Duration(c.CPUNS)})
		}
		writeTable(&b, rows, 1)
	}
	for _, u := range j.Uprobes {
		if u.Error != "" {
			fmt.Fprintf(&b, "  uprobe %s: not attached (%s)\n", format.Escape(u.Name), format.Escape(u.Error))
			continue
		}
		fmt.Fprintf(&b, "  uprobe %s: %d calls, %s (%s on CPU)\n", format.Escape(u.Name), u.Calls, format.Duration(u.TotalNS), format.Duration(u.CPUNS))
	}
	return b.String()
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
		if c.ContainerLayer {
			s += " (a container's writable layer: a new container starts cold)"
		}
		parts = append(parts, s)
	}
	if c.Unreadable {
		parts = append(parts, "not readable by the command's user: size unknown")
	}
	if c.SizeBytes > 0 || c.Files > 0 {
		s := fmt.Sprintf("%s in %d files", format.Bytes(uint64(c.SizeBytes)), c.Files)
		if c.SizeCapped {
			s = "at least " + s
		}
		if c.LimitBytes > 0 {
			s += fmt.Sprintf(" of a %s limit", format.Bytes(uint64(c.LimitBytes)))
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
	if c.Offline != "" {
		for _, sw := range strings.Split(c.Offline, ", ") {
			parts = append(parts, sw+": offline, a rerun cannot download: a file missing from the cache fails the run")
		}
	}
	return strings.Join(parts, "; ")
}
