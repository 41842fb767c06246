package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestHelpFlagPrintsTheSubcommands: `coldtrace --help` and `-h` print
// what `coldtrace help` prints, on stdout, with exit 0.
func TestHelpFlagPrintsTheSubcommands(t *testing.T) {
	var want bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &want, &bytes.Buffer{}, time.Now()); code != 0 || want.Len() == 0 {
		t.Fatalf("help: exit %d, %d bytes", code, want.Len())
	}
	for _, arg := range []string{"--help", "-h"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{arg}, &out, &errb, time.Now())
		if code != 0 || out.String() != want.String() || errb.Len() != 0 {
			t.Errorf("coldtrace %s: exit %d, stdout %d bytes (want %d), stderr %q", arg, code, out.Len(), want.Len(), errb.String())
		}
	}
	for _, sub := range []string{"attach", "report", "diff", "merge", "status", "evict", "prefetch", "bench", "doctor", "mark"} {
		if !strings.Contains(want.String(), "coldtrace "+sub) {
			t.Errorf("help does not list %s", sub)
		}
	}
}

// TestUsageErrorSaidOnce: a usage error is one line on stderr that says
// "usage" at most once, nothing on stdout, exit 125.
func TestUsageErrorSaidOnce(t *testing.T) {
	for _, args := range [][]string{
		{}, {"run"}, {"--bogus"}, {"report"}, {"report", "--bogus"}, {"diff"}, {"merge"}, {"mark"},
		{"evict"}, {"prefetch"}, {"status", "--bogus"}, {"attach"}, {"attach", "--pid", "x"}, {"bench"}, {"doctor", "--bogus"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb, time.Now())
		line := errb.String()
		if code != exitUsage || out.Len() != 0 || strings.Count(line, "\n") != 1 ||
			strings.Count(line, "usage") > 1 || !strings.HasPrefix(line, "coldtrace: error: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q: want one line, usage said at most once", args, code, out.String(), line)
		}
	}
}
