package metrics

import (
	"strings"

	"github.com/coldtrace/coldtrace/record"
)

// TextfileName is the file a run's metrics take in node_exporter's
// textfile directory: coldtrace_JOB_INSTANCE.prom (Group's job and
// instance, characters other than letters, digits, '.', '-' and '_' as
// '_'), so that runs of different ranks on one node keep their own files
// and the next run of the same rank replaces its file.
func TextfileName(r *record.Record) string {
	job, instance := Group(r)
	return "coldtrace_" + fileSafe(job) + "_" + fileSafe(instance) + ".prom"
}

func fileSafe(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
			return c
		}
		return '_'
	}, s)
}
