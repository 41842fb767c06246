package jit

// Flags: -target amd64 because the programs compare x86-64 syscall numbers
// and read x86-64 pt_regs (bpf/include/syscall64.h); -O2 because the
// verifier rejects unoptimized code; -g for the BTF that CO-RE and the
// -type exports need; -Wall -Werror so a warning fails `make generate`.
// -type exports the records, map values and enums user space reads, so no
// Go copy of them exists. -I../include is the one place of the shared
// headers; /usr/include/x86_64-linux-gnu has Debian's asm/ headers.
//go:generate go tool bpf2go -tags linux -target amd64 -cflags "-O2 -g -Wall -Werror" -type file_event -type exec_event -type fork_event -type uprobe_event -type jit_event_kind -type lost_kind -type root_prefix -type proc_verdict -type image_key -type known_bit -type exec_limit Jit jit.bpf.c -- -I../include -I/usr/include/x86_64-linux-gnu
