// Package pagecache holds the page-cache sensor's BPF object (accesses,
// misses, fill intervals, paths) and the Go bindings bpf2go generates for
// it. The generated .o is committed, so building coldtrace needs no clang;
// `make generate` rebuilds it.
package pagecache
