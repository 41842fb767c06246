package words

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// brokenFix is what to do about a cache that does not keep its entries.
const brokenFix = "put the cache on a local disk or give each process its own"

// brokenWho names the cache: "Triton cache at /nfs/triton".
func brokenWho(b advice.BrokenCache) string {
	return cmp.Or(b.Framework, b.Cache) + " cache at " + b.Root
}

// brokenSentence says the failed calls (or the entries gone, inferred)
// and what a rerun pays.
func brokenSentence(b advice.BrokenCache) string {
	if b.Inferred {
		return fmt.Sprintf("the %s: %d of the %d entries written this run were gone at the end (inferred: the failing call was not traced); a rerun compiles them again%s — %s",
			brokenWho(b), b.EntriesGone, b.EntriesWritten, compileCost(b.CompileNS), brokenFix)
	}
	return fmt.Sprintf("the %s failed %s: entries were compiled but not kept; a rerun compiles again%s — %s",
		brokenWho(b), failureWords(b.Failures), compileCost(b.CompileNS), brokenFix)
}

func brokenAction(b advice.BrokenCache) string {
	return fmt.Sprintf("the %s: %s", brokenWho(b), brokenFix)
}

// failureWords says the failed calls: "12 renames (EBUSY) and 1 unlink
// (ENOENT)", the two commonest.
func failureWords(fs []record.CacheFailure) string {
	var parts []string
	for _, f := range fs[:min(len(fs), 2)] {
		parts = append(parts, fmt.Sprintf("%s (%s)", format.Counted(f.Count, f.Op, f.Op+"s"), f.Errno))
	}
	if len(fs) > 2 {
		parts = append(parts, fmt.Sprintf("%d other kinds of call", len(fs)-2))
	}
	return strings.Join(parts, " and ")
}

// compileCost is " (3.0 s of compiles this run)", or nothing when no
// compile time was seen.
func compileCost(ns int64) string {
	if ns <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%s of compiles this run)", tenths(ns))
}
