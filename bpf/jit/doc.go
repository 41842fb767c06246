// Package jit holds the JIT sensor's BPF object (path syscalls, execs with
// their environment, compile uprobes) and the Go bindings bpf2go generates
// for it. The generated .o is committed, so building coldtrace needs no
// clang; `make generate` rebuilds it.
package jit
