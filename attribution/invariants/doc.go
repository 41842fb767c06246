// Package invariants checks that a run record is consistent with itself:
// the ledger's categories sum to the wall time; a file's fill CPU is no
// more than the CPU of the threads that filled it; a thread's on-CPU plus
// off-CPU time is its lifetime within one sampling interval; a file's I/O
// wait is no more than the run's; a file read through the read path had
// at least as many pages accessed as missed. A record that breaks one is
// a bug in the tracer, not a rounding: the e2e tests run Check on every
// record they produce. Sensors that add sections add their own rules
// here.
package invariants
