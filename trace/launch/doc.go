// Package launch starts the traced command gated: coldtrace re-executes
// itself as a small shim (ShimArg, RunShim) that takes the command's user
// (internal/actor decides who that is), finds the program, says it is
// ready and waits on a pipe while the probes are attached and its pid is
// seeded into the tracked set; released, it execs the command at once, the
// way `perf stat -- cmd` gates its workload. Everything the shim needs
// (argv, environment, user) travels in a sealed memory file, byte for
// byte, so an argv or environment as large as the kernel allows the
// command fits and arguments that are not UTF-8 arrive unchanged. The
// command runs in a process group of its own, which holds the terminal
// when coldtrace did.
package launch
