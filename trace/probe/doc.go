// Package probe holds what every sensor package under trace/ shares: the
// monotonic clock the BPF programs stamp events with, the set of processes
// that were part of a run, the file key of the page-cache tables, and one
// way to read BPF maps, lost counters and ring buffers (records decoded
// one way: a length check, then the bpf2go-generated type).
//
// The run session (package trace) drives the sensors through its Sensor
// interface; this package has no sensor of its own.
package probe
