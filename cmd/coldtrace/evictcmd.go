package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency"
)

// evictCommand is `coldtrace evict PATH…|--from RECORD`: drop exactly
// those files from the page cache (never drop_caches), and say what
// could not be dropped and why.
func evictCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("coldtrace evict", "usage: coldtrace evict [--json] PATH...|--from RECORD\n\n"+
		"Drops exactly these files (directories recursively) from the page cache: dirty pages are\n"+
		"written back first (fdatasync), then POSIX_FADV_DONTNEED; cachestat verifies.\n\nflags:\n", stderr)
	from := fs.String("from", "", "evict the files `RECORD` read from disk")
	asJSON := fs.Bool("json", false, "print JSON")
	var doc documentOutput
	doc.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return parseFailed(stderr, err)
	}
	if *from == "" && fs.NArg() == 0 {
		return fail(stderr, exitUsage, fmt.Errorf("%w: nothing to evict; usage: coldtrace evict PATH...|--from RECORD", errUsage))
	}
	who, err := invokingUser()
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if err := doc.check(who.actor); err != nil {
		return fail(stderr, exitUsage, err)
	}
	paths, _, err := targetPaths(who, *from, fs.Args(), stderr)
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	done, probs := residency.Evict(who.actor, paths)
	printProblems(stderr, probs)
	err = doc.write(who.actor, stdout, func(w io.Writer) error {
		if *asJSON {
			return encodeJSON(w, evictJSON{"coldtrace.evict/v1", done})
		}
		return writeEvictText(w, done)
	})
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if len(probs) > 0 {
		return exitPartial
	}
	return 0
}

func writeEvictText(w io.Writer, done []residency.Evicted) error {
	var b strings.Builder
	var dropped, size int64
	var unknown int
	for _, e := range done {
		dropped += e.DroppedBytes
		size += e.Size
		if !e.Known {
			unknown++
		}
	}
	fmt.Fprintf(&b, "coldtrace evict: %s (%s), %s dropped from the page cache\n", plural(len(done), "file"), format.Bytes(uint64(size)), format.Bytes(uint64(dropped)))
	if unknown > 0 {
		fmt.Fprintf(&b, "  %s asked to go, but this user may not see how much went\n", plural(unknown, "file"))
	}
	for _, e := range done {
		switch {
		case !e.Known:
			linef(&b, "  %s: dropped, not verified (%s)", e.Path, e.Unknown)
		case e.KeptPages > 0:
			// keptWhy names other processes by their comm: escaped with
			// the rest of the line.
			linef(&b, "  %s: %s dropped, %d pages kept: %s", e.Path, format.Bytes(uint64(e.DroppedBytes)), e.KeptPages, keptWhy(e))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
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

// evictJSON is `coldtrace evict --json`.
type evictJSON struct {
	Schema string              `json:"schema"`
	Files  []residency.Evicted `json:"files"`
}
