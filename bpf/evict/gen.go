package evict

// Flags as in bpf/pagecache/gen.go: -target amd64 for x86-64 syscall
// numbers and pt_regs, -O2 for the verifier, -g for CO-RE and -type,
// -Wall -Werror so a warning fails `make generate`; -I../include is the
// one place of the shared headers.
//go:generate go tool bpf2go -tags linux -target amd64 -cflags "-O2 -g -Wall -Werror" -type evict_key -type evict_stats -type inserter_key -type inserter_stats -type evict_kind -type lost_kind Evict evict.bpf.c -- -I../include -I/usr/include/x86_64-linux-gnu
