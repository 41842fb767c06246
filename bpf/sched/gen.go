package sched

// Flags: -target amd64 because the programs compare x86-64 syscall numbers
// and read x86-64 pt_regs (bpf/include/syscall64.h); -O2 because the
// verifier rejects unoptimized code; -g for the BTF that CO-RE and the
// -type exports need; -Wall -Werror so a warning fails `make generate`.
// -type exports the records, map values and enums user space reads, so no
// Go copy of them exists. -I../include is the one place of the shared
// headers; /usr/include/x86_64-linux-gnu has Debian's asm/ headers.
//go:generate go tool bpf2go -tags linux -target amd64 -cflags "-O2 -g -Wall -Werror" -type thread -type tstate -type file_key -type task_event -type task_event_kind -type secure_exec_reason -type thread_flag -type lost_kind Sched sched.bpf.c -- -I../include -I/usr/include/x86_64-linux-gnu
