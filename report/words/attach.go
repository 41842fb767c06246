package words

import (
	"fmt"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
)

// Attached says how an attached trace began ("attached at +0; 1 process,
// 37 threads; what happened before is not known"), or "" for a run.
func Attached(a *record.Attached) string {
	if a == nil {
		return ""
	}
	return "attached at +0; " + AttachCounts(*a) + "; what happened before is not known"
}

// AttachCounts says how many processes and threads an attach found.
func AttachCounts(a record.Attached) string {
	return fmt.Sprintf("%d %s, %d %s", a.Processes, format.Plural(uint64(a.Processes), "process", "processes"),
		a.Threads, format.Plural(uint64(a.Threads), "thread", "threads"))
}
