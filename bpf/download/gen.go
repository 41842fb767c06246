// Package download holds coldtrace's network BPF program (bytes received
// per TCP connection a tracked thread opened, and the files its receiving
// thread writes) and the Go bindings bpf2go generates for it. The
// generated .o is committed, so building coldtrace needs no clang.
package download

// -I../include finds common.h and vmlinux.h, shared with the other objects (the
// tracked set's map types must match the core's exactly);
// -D__TARGET_ARCH_x86 gives BPF_KPROBE the argument registers of the
// getaddrinfo uprobes.
//go:generate go tool bpf2go -tags linux -target amd64 -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86" -type conn -type rx_slot -type write_key -type write_stats -type dl_lost -type lookup -type host_from Download download.bpf.c -- -I../include -I/usr/include/x86_64-linux-gnu
