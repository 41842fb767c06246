// Package evict is the eviction sensor: per file the run touched, who
// evicted its pages during the run (kswapd, direct or memory-cgroup
// reclaim and in which process and cgroup, kdamond, a process's fadvise,
// truncate or unlink) and which processes outside the run read it from
// disk meanwhile. It loads bpf/evict with the scheduler's shared maps and
// writes record.File's Evictors and Inserters.
package evict
