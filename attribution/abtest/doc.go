// Package abtest judges an interleaved A/B benchmark: A B A B … A runs of
// two commands, each traced. It is pure: the runs come in as numbers
// (wall time, the six-category split, system time, interference), and the
// verdict goes out as data; nothing here runs a command or reads the
// system.
//
// The method is bracketing (docs/cmd/bench.md): compare each B with the mean
// of the A runs on either side of it, so a slow drift of the machine
// cancels out; compare the first and last A to see how large the drift
// was; say "no difference beyond drift" when the bracketed differences
// straddle zero or their median is smaller than the drift. Runs in the
// VM's slow mode (system time over twice the least of the same side) and
// outliers are set apart before any of that, and reported.
package abtest
