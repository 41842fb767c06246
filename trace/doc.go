// Package trace runs one traced command: it checks the machine
// (Preflight), loads the sensors (scheduler, page cache, JIT, GPU; each a
// package of its own under trace/), launches the command gated
// (trace/launch), polls the sensors every interval into timeline samples,
// handles the signals cmd passes in, and when the command exits has each
// sensor fill its part of the record.
package trace
