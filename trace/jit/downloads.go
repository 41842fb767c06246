package jit

import (
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// A download brings no path-syscall probe in (docs/sources.md): the
// network sensor sees it and the page-cache sensor the file it fills. On
// tmpfs neither sees the file land in a weights cache, so the caches a
// downloading process resolves are kept in the record (when their root
// exists at the end) for the download to be placed in one.

// DownloadSeen is told, from the download sensor's poll, that process pid
// is downloading.
func (e *Sensor) DownloadSeen(pid int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.col != nil {
		e.col.downloading(pid)
	}
}

// downloading marks the weights caches (their misses are downloads) that
// pid's environment places.
func (c *Collector) downloading(pid int32) {
	p := c.proc(pid)
	for _, r := range registry.Resolve(c.specs, p.env, c.identity(p)) {
		if !r.Spec.Compiles {
			c.addRoot(r).downloaded = true
		}
	}
}

// downloadedInto says whether the root is kept for a download: a
// downloading process placed it, and it exists at the end.
func (r *rootState) downloadedInto(fs FS) bool {
	if !r.downloaded || fs == nil {
		return false
	}
	_, ok := fs.Size(r.root.Path)
	return ok
}

// CacheRead records a file's first sight by the run, a read or mapping
// of a file already there, as a lookup that found it, where the file lies
// under a weights cache whose rules need no path syscall (pip's, torch.hub's,
// Hugging Face's): a rerun reading what a download left is that cache's
// hit. While the path syscalls are traced they see the lookups
// themselves.
func (c *Collector) CacheRead(f probe.FileSeen) {
	r, _ := c.roots.match(f.Path)
	if r == nil || r.root.Spec.Compiles || !r.root.Spec.SeenWithoutPathSyscalls {
		return
	}
	c.Seen++
	c.observe(FileEvent{TS: f.TS, PID: f.PID, TID: f.TID, CPUNS: f.CPUNS, Op: OpOpen, Path: f.Path})
}
