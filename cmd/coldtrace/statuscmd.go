package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/coldrun"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

// StatusSchema names the JSON of `coldtrace status --json`.
const StatusSchema = "coldtrace.status/v1"

// warmShare: a run whose files are cached but for this share is warm.
const warmShare = 0.01

// statusReport is `coldtrace status`, as JSON and as the text is made
// from.
type statusReport struct {
	Schema     string           `json:"schema"`
	Record     string           `json:"record,omitempty"`
	User       statusUser       `json:"user"`
	Files      []residency.File `json:"files"`
	Totals     statusTotals     `json:"totals"`
	Caches     []kcache.Cache   `json:"caches"`
	Prediction *prediction      `json:"prediction,omitempty"`
	// Verdict is the one-line answer, the prediction's sentence, under
	// the key every document has it; absent without a prediction.
	Verdict  string              `json:"verdict,omitempty"`
	Problems []string            `json:"problems,omitempty"`
	byName   map[string][]string // record cache name → roots
}

type statusUser struct {
	UID  uint32 `json:"uid"`
	Name string `json:"name,omitempty"`
	Home string `json:"home,omitempty"`
}

type statusTotals struct {
	Files        int   `json:"files"`
	SizeBytes    int64 `json:"size_bytes"`
	CachedBytes  int64 `json:"cached_bytes"`
	UnknownFiles int   `json:"unknown_files"`
	UnknownBytes int64 `json:"unknown_bytes"`
}

// prediction is what the next run will find.
type prediction struct {
	// State is "warm", "cold" or "unknown" (the kernel would not say).
	State        string  `json:"state"`
	MissingBytes int64   `json:"missing_bytes"`
	DiskRate     float64 `json:"disk_rate_bytes_per_s,omitempty"`
	// ETANS is the time to read MissingBytes at DiskRate.
	ETANS    int64  `json:"eta_ns,omitempty"`
	Sentence string `json:"sentence"`
}

// statusCommand is `coldtrace status [--from RECORD] [--json] [PATH…]`:
// how much of a run's files (or the paths given) is in the page cache
// now, the registry's caches for the invoking user, and what the next
// run will therefore be. It runs nothing.
func statusCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("coldtrace status", "usage: coldtrace status [--from RECORD] [--json] [PATH...]\n\n"+
		"How much of a run's files (or of PATHs, directories recursively) is in the page cache now,\n"+
		"the kernel caches of the invoking user, and whether the next run will be cold. Runs nothing.\n\nflags:\n", stderr)
	from := fs.String("from", "", "the files `RECORD` read from disk, and the caches it used")
	asJSON := fs.Bool("json", false, "print JSON (schema "+StatusSchema+")")
	top := fs.Int("top", defaultTop, "files listed in the text")
	var doc documentOutput
	doc.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return parseFailed(stderr, err)
	}
	who, err := invokingUser()
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if err := doc.check(who.actor); err != nil {
		return fail(stderr, exitUsage, err)
	}
	rep, failed, err := buildStatus(who, *from, fs.Args(), stderr)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	err = doc.write(who.actor, stdout, func(w io.Writer) error {
		if *asJSON {
			return encodeJSON(w, rep)
		}
		return writeStatusText(w, rep, *top)
	})
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if failed {
		return exitPartial
	}
	return 0
}

// buildStatus gathers the report; failed says some path could not be
// handled (its line is already on stderr).
func buildStatus(who actingUser, from string, paths []string, stderr io.Writer) (*statusReport, bool, error) {
	rep := &statusReport{Schema: StatusSchema, Record: from,
		User: statusUser{UID: who.id.UID, Name: who.id.User, Home: who.env["HOME"]}, byName: map[string][]string{}}
	all, in, err := targetPaths(who, from, paths, stderr)
	if err != nil {
		return nil, false, err
	}
	var probs []residency.Problem
	if len(all) > 0 {
		rep.Files, probs = residency.Stat(who.actor, all)
	}
	printProblems(stderr, probs)
	for _, p := range probs {
		rep.Problems = append(rep.Problems, p.Error())
	}
	if rep.Files == nil {
		rep.Files = []residency.File{} // "files": [] in the JSON, never null
	}
	for _, f := range rep.Files {
		rep.Totals.Files++
		rep.Totals.SizeBytes += f.Size
		rep.Totals.CachedBytes += f.CachedBytes
		if !f.Known {
			rep.Totals.UnknownFiles++
			rep.Totals.UnknownBytes += f.Size
		}
	}

	roots := registry.Resolve(registry.Registry, who.env, who.id)
	if in != nil && in.rec.JIT != nil {
		for _, c := range in.rec.JIT.Caches {
			if !filepath.IsAbs(c.Root) {
				continue // an in-tree cache ("**/__pycache__"): no one root to look at
			}
			if coldrun.InFreshCaches(in.rec.MadeCold, c.Root) {
				continue // a --cold run's fresh cache: removed, and no run after it uses it
			}
			rep.byName[c.Name] = append(rep.byName[c.Name], c.Root)
			spec := registry.UserSpec(c.Name, c.Root)
			roots = append(roots, registry.Root{Spec: &spec, Path: c.Root, Via: "record"})
		}
	}
	rules, err := residency.LoadTmpfiles(residency.DefaultTmpfilesDirs)
	if err != nil {
		fmt.Fprintf(stderr, "coldtrace: warning: %s (cache ages not checked)\n", errorText(err))
	}
	rep.Caches = kcache.Survey(who.actor, roots, who.env, kcache.Options{Tmpfiles: rules})

	if len(rep.Files) > 0 || in != nil {
		var rate float64
		what := "the given files"
		if in != nil {
			rate, what = in.diskRate, "the files it read from disk"
		}
		rep.Prediction = predict(rep.Totals, rate, what, rep.recordCaches())
		rep.Verdict = rep.Prediction.Sentence
	}
	return rep, len(probs) > 0, nil
}

// recordCaches are the surveyed caches the record's run used.
func (rep *statusReport) recordCaches() []kcache.Cache {
	var out []kcache.Cache
	seen := map[string]bool{}
	for _, c := range rep.Caches {
		for _, root := range rep.byName[c.Name] {
			if c.Root == root && !seen[c.Name+"\x00"+c.Root] {
				seen[c.Name+"\x00"+c.Root] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// predict says what the next run will find: "next run: warm for model
// files (13.1 of 13.1 GiB cached); Triton cache: 1,180 entries", or
// "next run: cold: 12.9 GiB … not cached — about 4m at the disk rate of
// the recorded run".
func predict(t statusTotals, rate float64, what string, caches []kcache.Cache) *prediction {
	p := &prediction{DiskRate: rate}
	known := t.SizeBytes - t.UnknownBytes
	p.MissingBytes = known - t.CachedBytes
	var parts []string
	switch {
	case t.Files == 0:
		p.State = "warm"
		parts = append(parts, "no files to read ("+what+": none)")
	case t.UnknownFiles == t.Files:
		p.State = "unknown"
		parts = append(parts, fmt.Sprintf("unknown: this user may not see the page cache of %s (%s)", what, format.Bytes(uint64(t.SizeBytes))))
	case float64(p.MissingBytes) <= warmShare*float64(known):
		p.State = "warm"
		parts = append(parts, fmt.Sprintf("warm for %s (%s of %s cached)", what, gib(t.CachedBytes), format.Bytes(uint64(known))))
	default:
		p.State = "cold"
		s := fmt.Sprintf("cold: %s of %s not cached", format.Bytes(uint64(p.MissingBytes)), what)
		if rate > 0 {
			p.ETANS = int64(float64(p.MissingBytes) / rate * 1e9)
			s += fmt.Sprintf(" — about %s at the disk rate of the recorded run (%.0f MB/s)", roughDuration(p.ETANS), rate/1e6)
		}
		parts = append(parts, s)
	}
	if t.UnknownFiles > 0 && p.State != "unknown" {
		parts = append(parts, fmt.Sprintf("%s (%s) unknown to this user", plural(t.UnknownFiles, "file"), format.Bytes(uint64(t.UnknownBytes))))
	}
	for _, c := range caches {
		parts = append(parts, cacheOutlook(c))
	}
	p.Sentence = "next run: " + strings.Join(parts, "; ")
	return p
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

// cacheOutlook is one cache in the prediction.
func cacheOutlook(c kcache.Cache) string {
	name := c.Framework + " cache"
	switch {
	case c.NotReadable:
		return name + ": not readable by this user"
	case len(c.Disabled) > 0:
		return name + ": disabled (" + strings.SplitN(c.Disabled[0], ":", 2)[0] + "), everything compiles again"
	case !c.Exists || c.Entries == 0:
		return name + ": empty, everything compiles again"
	}
	s := fmt.Sprintf("%s: %s", name, plural64(c.Entries, "entry", "entries"))
	if c.Capped {
		s = fmt.Sprintf("%s: at least %s", name, plural64(c.Entries, "entry", "entries"))
	}
	if c.FS != nil && c.FS.Survival != residency.Persistent {
		s += " (" + c.FS.Sentence() + ")"
	}
	return s
}

// roughDuration rounds a prediction to what it can honestly claim.
func roughDuration(ns int64) string {
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

// thousands writes n with comma separators: 1,180.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func writeStatusText(w io.Writer, rep *statusReport, top int) error {
	var b strings.Builder
	t := rep.Totals
	if t.Files > 0 {
		share := "unknown"
		if known := t.SizeBytes - t.UnknownBytes; known > 0 {
			share = fmt.Sprintf("%.0f%% cached", 100*float64(t.CachedBytes)/float64(known))
		}
		fmt.Fprintf(&b, "coldtrace status: %s, %s, %s\n\n", plural(t.Files, "file"), format.Bytes(uint64(t.SizeBytes)), share)
		files := rep.Files
		if rep.Record == "" {
			files = append([]residency.File(nil), files...)
			sort.SliceStable(files, func(i, j int) bool { return files[i].Size > files[j].Size })
		}
		fmt.Fprintf(&b, "  %-60s %10s  %s\n", "file", "size", "cached")
		for i, f := range files {
			if i == top {
				fmt.Fprintf(&b, "  … and %d more files\n", len(files)-top)
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
			fmt.Fprintf(&b, "  %-60s %10s  %s\n", shortFilePath(format.Escape(f.Path), 60), format.Bytes(uint64(f.Size)), cached)
		}
		b.WriteString("\n")
	} else if rep.Record == "" {
		b.WriteString("coldtrace status\n\n")
	}
	writeCacheTable(&b, rep)
	if rep.Prediction != nil {
		b.WriteString("\n")
		linef(&b, "  %s", rep.Prediction.Sentence)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCacheTable(b *strings.Builder, rep *statusReport) {
	linef(b, "  kernel caches (uid %d, HOME=%s)", rep.User.UID, rep.User.Home)
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
		linef(b, "    in-tree (__pycache__ next to the sources): %s", strings.Join(inTree, ", "))
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
		linef(b, "    not present: %s", strings.Join(none, ", "))
	}
}

// writeCacheRow is one cache of the table: where it is, its filesystem
// and contents, its switches. Every line is escaped whole: the root,
// the names and the switch values come from the environment and the
// record.
func writeCacheRow(b *strings.Builder, c kcache.Cache) {
	linef(b, "    %-16s %s (via %s)", c.Name, c.Root, c.Via)
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
		line += fmt.Sprintf("; %s%s, %s, %s", at, plural64(c.Entries, "entry", "entries"), plural64(c.Files, "file", "files"), format.Bytes(uint64(c.SizeBytes)))
		if c.Unreadable > 0 {
			line += fmt.Sprintf(" (%d directories unreadable to this user)", c.Unreadable)
		}
	}
	linef(b, "%s", line)
	for _, d := range c.Disabled {
		linef(b, "      DISABLED: %s", d)
	}
	for _, o := range c.Offline {
		linef(b, "      OFFLINE: %s", o)
	}
	if len(c.Disabled) == 0 && len(c.Switches) > 0 {
		linef(b, "      off switches: %s", strings.Join(c.Switches, ", "))
	}
}

// plural writes "1 file", "2 files".
func plural(n int, one string) string { return plural64(int64(n), one, one+"s") }

func plural64(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}
