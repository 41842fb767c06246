package words

import (
	"fmt"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/format"
)

// candidateSentence: "/home/u/.cache/tool may be a cache: this run
// created 2.0 MiB in 2 files there", or, read back by a second run, why
// it is one.
func candidateSentence(c advice.CacheCandidate) string {
	dir := advice.ShellQuote(c.Dir)
	files := format.Counted(uint64(max(c.Files, 0)), "file", "files")
	size := format.Bytes(uint64(max(c.CreatedBytes, 0)))
	if c.Reused {
		return fmt.Sprintf("%s may be a cache the registry does not know: run A created %s in %s there and run B read them without rewriting; keep it between runs (or add it with --cache-dir NAME=%s)",
			dir, size, files, dir)
	}
	return fmt.Sprintf("%s may be a cache: this run created %s in %s there", dir, size, files)
}

func candidateAction(c advice.CacheCandidate) string {
	return "keep " + advice.ShellQuote(c.Dir) + " between runs"
}
