package main

import (
	"fmt"
	"io"

	"github.com/coldtrace/coldtrace/report/status"
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
	err = doc.writeDocument(who.actor, stdout, *asJSON, status.NewEvictDocument(done),
		func(w io.Writer) error { return status.WriteEvictText(w, done) })
	if err != nil {
		return fail(stderr, exitFailure, err)
	}
	if len(probs) > 0 {
		return exitPartial
	}
	return 0
}
