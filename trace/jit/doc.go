// Package jit is the JIT and kernel-cache sensor. Its Sensor loads
// bpf/jit (path syscalls of tracked threads, their execs with argv and
// environment, new processes, uprobes on compile entry points) with the
// scheduler object's tracked set, and attaches the path-syscall probes
// only once a process uses a framework with a kernel cache (or from the
// start when the command is one, or when asked).
//
// The rest is pure logic over those events: which cache directories the
// command used (resolved with each traced process's own environment),
// their lookups, hits, misses and writes, the compiler subprocesses it ran
// and the in-process compiles between a miss and its fill. The cache
// registry is data, in the package registry: one Spec per framework
// (docs/cache-registry.md; docs/sources.md says which probe sees which of
// its rules).
package jit
