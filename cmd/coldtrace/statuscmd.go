package main

import (
	"fmt"
	"io"

	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/report/status"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/residency/kcache"
	"github.com/coldtrace/coldtrace/residency/outlook"
)

// statusCommand is `coldtrace status [--from RECORD] [--json] [PATH…]`:
// how much of a run's files (or the paths given) is in the page cache
// now, the registry's caches for the invoking user, and what the next
// run will therefore be. It runs nothing.
func statusCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("coldtrace status", "usage: coldtrace status [--from RECORD] [--json] [PATH...]\n\n"+
		"How much of a run's files (or of PATHs, directories recursively) is in the page cache now,\n"+
		"the kernel caches of the invoking user, and whether the next run will be cold. Runs nothing.\n\nflags:\n", stderr)
	from := fs.String("from", "", "the files `RECORD` read from disk, and the caches it used")
	asJSON := fs.Bool("json", false, "print JSON (schema "+status.Schema+")")
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
	err = doc.writeDocument(who.actor, stdout, *asJSON, rep,
		func(w io.Writer) error { return status.WriteText(w, rep, *top) })
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
func buildStatus(who actingUser, from string, paths []string, stderr io.Writer) (*status.Report, bool, error) {
	rep := &status.Report{Schema: status.Schema, Record: from,
		User: status.User{UID: who.id.UID, Name: who.id.User, Home: who.env["HOME"]}}
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
	rep.Totals = outlook.Sum(rep.Files)

	roots := registry.Resolve(registry.Registry, who.env, who.id)
	var byName map[string][]string
	if in != nil {
		var used []registry.Root
		used, byName = outlook.RecordRoots(in.rec)
		roots = append(roots, used...)
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
		rep.Prediction = outlook.Predict(rep.Totals, rate)
		rep.Prediction.Sentence = status.Sentence(rep.Prediction, rep.Totals, what, outlook.RecordCaches(rep.Caches, byName))
		rep.Verdict = rep.Prediction.Sentence
	}
	return rep, len(probs) > 0, nil
}
