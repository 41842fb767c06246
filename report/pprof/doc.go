// Package pprof renders a run's breakdown as a pprof profile (go tool
// pprof -http): stacks category → subject (file, compiler or cache, GPU,
// download) → process "comm[pid]", with wall time and bytes read from disk
// as sample types. The wall values sum to the run's wall time.
package pprof
