// Package pystack holds coldtrace's Python stack BPF program (the CPython
// frame walker of bpf/include/pywalk.h, taken where a traced Python
// process forks) and the Go bindings bpf2go generates for it. The
// generated .o is committed, so building coldtrace needs no clang.
package pystack

// Flags as in bpf/pagecache/gen.go; -type exports the records and the
// per-process configuration user space writes.
//go:generate go tool bpf2go -tags linux -target amd64 -cflags "-O2 -g -Wall -Werror" -type py_conf -type py_exe_key -type py_frame -type py_stack -type py_event -type py_event_kind -type py_lost_kind -type py_count_kind Pystack pystack.bpf.c -- -I../include -I/usr/include/x86_64-linux-gnu
