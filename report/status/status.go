// Package status renders what coldtrace says about the machine as it is
// now: `coldtrace status` (how much of a run's files is in the page cache,
// the invoking user's kernel caches, and the prediction of
// residency/outlook in words), and what `evict` dropped and `prefetch`
// read or would read; each as text and as its named JSON document.
package status

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
	"github.com/coldtrace/coldtrace/residency/outlook"
)

// Schema names the JSON of `coldtrace status --json`.
const Schema = "coldtrace.status/v1"

// Report is `coldtrace status`, as JSON and as the text is made from.
type Report struct {
	Schema     string              `json:"schema"`
	Record     string              `json:"record,omitempty"`
	User       User                `json:"user"`
	Files      []residency.File    `json:"files"`
	Totals     outlook.Totals      `json:"totals"`
	Caches     []kcache.Cache      `json:"caches"`
	Prediction *outlook.Prediction `json:"prediction,omitempty"`
	// Verdict is the one-line answer, the prediction's sentence, under
	// the key every document has it; absent without a prediction.
	Verdict  string   `json:"verdict,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// User is who the caches were looked up for.
type User struct {
	UID  uint32 `json:"uid"`
	Name string `json:"name,omitempty"`
	Home string `json:"home,omitempty"`
}

// Sentence says p in words: "next run: warm for model files (13.1 of
// 13.1 GiB cached); Triton cache: 1,180 entries", or "next run: cold:
// 12.9 GiB … not cached — about 4 min at the disk rate of the recorded
// run". what names the files; caches are those the run used.
func Sentence(p *outlook.Prediction, t outlook.Totals, what string, caches []kcache.Cache) string {
	var parts []string
	known := t.SizeBytes - t.UnknownBytes
	switch {
	case t.Files == 0:
		parts = append(parts, "no files to read ("+what+": none)")
	case p.State == outlook.Unknown:
		parts = append(parts, fmt.Sprintf("unknown: this user may not see the page cache of %s (%s)", what, format.Bytes(uint64(t.SizeBytes))))
	case p.State == outlook.Warm:
		parts = append(parts, fmt.Sprintf("warm for %s (%s of %s cached)", what, gib(t.CachedBytes), format.Bytes(uint64(known))))
	default:
		s := fmt.Sprintf("cold: %s of %s not cached", format.Bytes(uint64(p.MissingBytes)), what)
		if p.DiskRate > 0 {
			s += fmt.Sprintf(" — about %s at the disk rate of the recorded run (%.0f MB/s)", RoughDuration(p.ETANS), p.DiskRate/1e6)
		}
		parts = append(parts, s)
	}
	if t.UnknownFiles > 0 && p.State != outlook.Unknown {
		parts = append(parts, fmt.Sprintf("%s (%s) unknown to this user", counted(int64(t.UnknownFiles), "file", "files"), format.Bytes(uint64(t.UnknownBytes))))
	}
	for _, c := range caches {
		parts = append(parts, CacheOutlook(c))
	}
	return "next run: " + strings.Join(parts, "; ")
}

// gib writes the cached part in the unit of the whole, so "13.1 of 13.1
// GiB" reads as a fraction.
func gib(n int64) string {
	s := format.Bytes(uint64(n))
	if i := strings.IndexByte(s, ' '); i > 0 {
		return s[:i]
	}
	return s
}

// CacheOutlook is one cache in the prediction.
func CacheOutlook(c kcache.Cache) string {
	name := c.Framework + " cache"
	switch {
	case c.NotReadable:
		return name + ": not readable by this user"
	case len(c.Disabled) > 0:
		return name + ": disabled (" + strings.SplitN(c.Disabled[0], ":", 2)[0] + "), everything compiles again"
	case !c.Exists || c.Entries == 0:
		return name + ": empty, everything compiles again"
	}
	s := fmt.Sprintf("%s: %s", name, counted(c.Entries, "entry", "entries"))
	if c.Capped {
		s = fmt.Sprintf("%s: at least %s", name, counted(c.Entries, "entry", "entries"))
	}
	if c.FS != nil && c.FS.Survival != residency.Persistent {
		s += " (" + c.FS.Sentence() + ")"
	}
	return s
}

// RoughDuration rounds a prediction to what it can honestly claim.
func RoughDuration(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d >= 2*time.Minute:
		return fmt.Sprintf("%d min", int((d+30*time.Second)/time.Minute))
	case d >= 10*time.Second:
		return fmt.Sprintf("%d s", int((d+500*time.Millisecond)/time.Second))
	case d < 100*time.Millisecond:
		return "under 0.1 s"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// counted is "1 entry", "1,180 entries".
func counted(n int64, one, many string) string { return format.Counted(uint64(max(n, 0)), one, many) }

// WriteText writes the report for the terminal, at most top files.
func WriteText(w io.Writer, rep *Report, top int) error {
	var b strings.Builder
	t := rep.Totals
	if t.Files > 0 {
		writeFiles(&b, rep, top)
	} else if rep.Record == "" {
		b.WriteString("coldtrace status\n\n")
	}
	WriteCacheTable(&b, rep)
	if rep.Prediction != nil {
		b.WriteString("\n")
		Line(&b, "  %s", rep.Prediction.Sentence)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFiles(b *strings.Builder, rep *Report, top int) {
	t := rep.Totals
	share := "unknown"
	if known := t.SizeBytes - t.UnknownBytes; known > 0 {
		share = fmt.Sprintf("%.0f%% cached", 100*float64(t.CachedBytes)/float64(known))
	}
	fmt.Fprintf(b, "coldtrace status: %s, %s, %s\n\n", counted(int64(t.Files), "file", "files"), format.Bytes(uint64(t.SizeBytes)), share)
	files := rep.Files
	if rep.Record == "" {
		files = append([]residency.File(nil), files...)
		sort.SliceStable(files, func(i, j int) bool { return files[i].Size > files[j].Size })
	}
	fmt.Fprintf(b, "  %-60s %10s  %s\n", "file", "size", "cached")
	for i, f := range files {
		if i == top {
			fmt.Fprintf(b, "  … and %d more files\n", len(files)-top)
			break
		}
		cached := fmt.Sprintf("%5.1f%%", 100*f.Fraction())
		if !f.Known {
			cached = "unknown (" + format.Escape(f.Unknown) + ")"
		} else if f.Dirty > 0 {
			cached += fmt.Sprintf(", %d pages dirty", f.Dirty)
		}
		// The path is escaped before it is cut, so the cut never
		// splits an escape or a character.
		fmt.Fprintf(b, "  %-60s %10s  %s\n", ShortPath(format.Escape(f.Path), 60), format.Bytes(uint64(f.Size)), cached)
	}
	b.WriteString("\n")
}

// WriteCacheTable writes the kernel caches of the report's user.
func WriteCacheTable(b *strings.Builder, rep *Report) {
	Line(b, "  kernel caches (uid %d, HOME=%s)", rep.User.UID, rep.User.Home)
	var absent, inTree []string
	shown := map[string]bool{}
	for _, c := range rep.Caches {
		switch {
		case c.InTree:
			inTree = append(inTree, c.Name)
			shown[c.Name] = true
			continue
		case !c.Exists && !c.NotReadable && c.Via == "default" && len(c.Disabled) == 0:
			absent = append(absent, c.Name)
			continue
		}
		shown[c.Name] = true
		writeCacheRow(b, c)
	}
	if len(inTree) > 0 {
		Line(b, "    in-tree (__pycache__ next to the sources): %s", strings.Join(inTree, ", "))
	}
	// A cache with a row of its own is not also "not present" for the
	// further default location it might use (Triton inside Inductor's).
	var none []string
	for _, name := range absent {
		if !shown[name] {
			shown[name] = true
			none = append(none, name)
		}
	}
	if len(none) > 0 {
		Line(b, "    not present: %s", strings.Join(none, ", "))
	}
}

// writeCacheRow is one cache of the table: where it is, its filesystem
// and contents, its switches. Every line is escaped whole: the root,
// the names and the switch values come from the environment and the
// record.
func writeCacheRow(b *strings.Builder, c kcache.Cache) {
	Line(b, "    %-16s %s (via %s)", c.Name, c.Root, c.Via)
	var facts string
	if c.FS != nil {
		facts = c.FS.Sentence()
		if c.FS.Missing {
			facts = "missing; would be on " + facts
		}
	}
	switch {
	case c.NotReadable:
		facts = "not readable by this user"
		if c.Error != "" {
			facts += " (" + c.Error + ")"
		}
	case c.Error != "":
		facts = "error: " + c.Error
	}
	line := "      " + facts
	if c.Exists && !c.NotReadable {
		at := ""
		if c.Capped {
			at = "at least "
		}
		line += fmt.Sprintf("; %s%s, %s, %s", at, counted(c.Entries, "entry", "entries"), counted(c.Files, "file", "files"), format.Bytes(uint64(c.SizeBytes)))
		if c.Unreadable > 0 {
			line += fmt.Sprintf(" (%d directories unreadable to this user)", c.Unreadable)
		}
	}
	Line(b, "%s", line)
	for _, d := range c.Disabled {
		Line(b, "      DISABLED: %s", d)
	}
	for _, o := range c.Offline {
		Line(b, "      OFFLINE: %s", o)
	}
	if len(c.Disabled) == 0 && len(c.Switches) > 0 {
		Line(b, "      off switches: %s", strings.Join(c.Switches, ", "))
	}
}

// Line writes one line, escaped whole: the arguments come from paths,
// environments and records.
func Line(b *strings.Builder, layout string, args ...any) {
	b.WriteString(format.Escape(fmt.Sprintf(layout, args...)))
	b.WriteByte('\n')
}

// ShortPath keeps the end of a long path, where its name is: n
// characters in all, cut at a character boundary so no partial UTF-8
// sequence is left.
func ShortPath(p string, n int) string {
	if utf8.RuneCountInString(p) <= n {
		return p
	}
	r := []rune(p)
	return "…" + string(r[len(r)-max(n-1, 0):])
}
