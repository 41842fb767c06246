// Package timeline renders a run as a Chrome trace-event JSON document,
// the format Perfetto (ui.perfetto.dev) and chrome://tracing open: a track
// per traced thread with its states in each sample interval, and a
// synthetic "coldtrace" process with the phases, compile and download
// lanes, and counters (disk read rate, page-cache misses, the breakdown's
// split, GPU utilisation and VRAM).
package timeline
