// Package launch starts the traced command gated: coldtrace re-executes
// itself as a small shim (ShimArg, RunShim) that waits on a pipe while the
// probes are attached and the shim's pid is seeded into the tracked set,
// then takes the invoking user's identity (ResolveIdentity: --user, sudo's
// SUDO_UID/SUDO_GID, or coldtrace's own) and execs the command, the way
// `perf stat -- cmd` gates its workload. The command runs in a process
// group of its own, which holds the terminal when coldtrace did.
package launch
