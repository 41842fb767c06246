// Package summary builds the JSON summary of a run for scripts (`--json`,
// `report --format json`, schema coldtrace.summary/v1): the run's facts,
// its files and processes, the attribution with its verdict and notes in
// words, caches, compilers and GPUs. Keys keep their meaning within v1;
// new keys may be added (docs/schemas/summary.schema.json has them all).
package summary
