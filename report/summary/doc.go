// Package summary builds the JSON summary of a run for scripts (`--json`,
// `report --format json`, schema coldtrace.summary/v1): the run's facts,
// its files and processes, the attribution with its verdict and notes in
// words, caches, compilers and GPUs. Keys documented in README.md keep
// their meaning within v1; new keys may be added.
package summary
