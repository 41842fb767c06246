// Package sched holds the scheduler sensor's BPF object (threads,
// fork/exec/exit, context switches) and the Go bindings bpf2go generates for
// it. The generated .o is committed, so building coldtrace needs no clang;
// `make generate` rebuilds it.
package sched
