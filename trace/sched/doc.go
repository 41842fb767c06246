// Package sched is the scheduler sensor: it loads bpf/sched, which keeps
// the tracked set (a thread is tracked once its parent was; the command's
// first process is seeded through a pidfd), each thread's on-CPU, run
// queue, I/O wait and other off-CPU time, and the fork/exec/exit events
// that name processes. It polls the thread table into timeline samples,
// recycles the slots of dead threads, and fills the record's threads and
// processes.
//
// Its object creates the maps the other BPF objects share (Shared); they
// take them as map replacements, so every sensor sees one tracked set.
package sched
