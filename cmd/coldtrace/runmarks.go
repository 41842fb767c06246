package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/marks"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/segments"
)

// runMarks opens the run's mark socket and gives the command its path in
// COLDTRACE_MARK. Without a socket (no /run here) the run goes on
// unmarked, with a warning.
func runMarks(a actor.Actor, env []string, stderr io.Writer) (*marks.Listener, []string) {
	l, err := marks.Listen(marks.Dir, int(a.UID), int(a.GID))
	if err != nil {
		fmt.Fprintf(stderr, "coldtrace: warning: marks are off: %v\n", err)
		return nil, env
	}
	if env == nil {
		env = os.Environ() // what trace.Options.Env nil stands for
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, marks.Env+"=") {
			out = append(out, kv)
		}
	}
	return l, append(out, marks.Env+"="+l.Path())
}

// markChannel is l's channel, or nil without a listener.
func markChannel(l *marks.Listener) <-chan marks.Mark {
	if l == nil {
		return nil
	}
	return l.C
}

// writeRunSegments prints the segment table after the summary when the
// run was cut (marks or --split-idle).
func writeRunSegments(w io.Writer, rec *record.Record, splitIdleNS int64) error {
	segs := attribution.Segments(rec, attribution.SegmentOptions{SplitIdleNS: splitIdleNS})
	if len(segs) < 2 {
		return nil
	}
	return segments.WriteText(w, attribution.Options{}.AnalyzeSegments(rec, segs))
}

// trackedBy lists the command's pid as the run's, so that `coldtrace mark
// --pid` finds it.
func trackedBy(l *marks.Listener, pid int, stderr io.Writer) {
	if l == nil {
		return
	}
	if err := l.Tracing([]int{pid}); err != nil {
		fmt.Fprintf(stderr, "coldtrace: warning: %v\n", err)
	}
}

// splitIdleMarks stores the --split-idle cuts of an unmarked record as
// marks, so that the record, its JSON, pprof and timeline, and later
// report and diff runs, all see the same segments.
func splitIdleMarks(rec *record.Record, splitIdleNS int64) {
	if splitIdleNS <= 0 || len(rec.Marks) > 0 {
		return
	}
	for _, s := range attribution.Segments(rec, attribution.SegmentOptions{SplitIdleNS: splitIdleNS}) {
		rec.Marks = append(rec.Marks, record.Mark{AtNS: s.StartNS, Label: s.Label})
	}
}
