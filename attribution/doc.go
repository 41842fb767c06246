// Package attribution turns a run record into a ledger of its wall-clock
// time: every nanosecond between the command's release and its exit lands
// in exactly one of six categories, each row carries the evidence behind it
// (files, compilers, caches, GPUs, downloads, processes), the timeline is cut
// into phases by their dominant category, and a verdict names the causes of
// a slow run with a warm-rerun estimate. The verdict and the notes are data
// (kinds, causes, names, durations); report/words says them in sentences,
// and report/format formats every number. attribution/compare compares two
// runs the same way.
//
// The package is pure Go: it reads a *record.Record and nothing else, makes
// no system calls and is deterministic (the same record gives the same
// result, byte for byte, when marshalled). The overlap rule is documented in
// docs/attribution.md and in [Analyze].
package attribution
