// Package pagecache is the page-cache sensor: it loads bpf/pagecache,
// which counts per file the pages the tracked threads accessed, missed
// (inserted), created and evicted and the CPU time their kernel entries
// spent filling the cache, and sends each file's path once. It polls the
// file table into timeline samples, resolves paths through the mount
// table (or /proc), and fills the record's files.
//
// Its BPF object takes the scheduler object's shared maps (the tracked
// set, the thread table, the file table) as map replacements.
package pagecache
