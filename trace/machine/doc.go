// Package machine records what the machine let a run use and what else
// took it, from procfs: /proc/meminfo at the start and the end, the
// memory cgroups of the traced processes and their limits (cgroup v1
// memory.limit_in_bytes, v2 memory.max and memory.high), the CPU time of
// processes outside the run (top few by name) and the VM's steal time.
// It has no BPF program; the session drives it as a sensor.
package machine
