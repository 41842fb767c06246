// Package fdtable sizes coldtrace's file-descriptor table for its start
// before the Go runtime starts its threads. Imported for that effect alone
// (by cmd/coldtrace), it has nothing to call.
//
// Why: the start makes some 250 descriptors (maps, programs, their BTF,
// links), and the kernel grows a process's descriptor table in steps
// (64, 256, 512, 1024 slots). A process whose table is shared by more
// than one thread (every Go program) waits for an RCU grace period at
// each step, and every thread that opens a descriptor meanwhile waits
// with it: 12–22 ms a step measured on the 2-vCPU VM, two steps in each
// start, with the CPUs idle. Grown once while the process has one thread
// (a C constructor, which runs before the Go runtime), the table costs
// no grace period.
package fdtable
