package jit

import "github.com/coldtrace/coldtrace/registry"

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
