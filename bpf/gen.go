// Package bpf holds coldtrace's BPF programs and the Go bindings bpf2go
// generates for them. The generated .o files are committed, so building
// coldtrace needs no clang; `make generate` rebuilds them.
package bpf

//go:generate go tool bpf2go -tags linux -target amd64 -cflags "-O2 -g -Wall -Werror" -type thread -type tstate -type file_key -type file_stats -type task_event -type path_event Coldtrace coldtrace.bpf.c -- -I. -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -tags linux -target amd64 -cflags "-O2 -g -Wall -Werror" -type file_event -type exec_event -type fork_event -type uprobe_event Jit jit.bpf.c -- -I. -I/usr/include/x86_64-linux-gnu
