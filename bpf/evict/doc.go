// Package evict holds the eviction sensor's BPF program and its bpf2go
// output: who drops the run's file pages from the page cache (kswapd,
// direct or memory-cgroup reclaim, kdamond, a process's syscall), and
// which untraced processes read the run's files from disk during it.
// trace/evict loads it with the scheduler object's shared maps.
package evict
