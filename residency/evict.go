package residency

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Evicted is what Evict did to one file.
type Evicted struct {
	Path string `json:"path"`
	Size int64  `json:"size_bytes"`
	// Known is false when cachestat would not tell this user the file's
	// residency (Unknown says why): the pages were still asked to go,
	// but how many went is not known.
	Known   bool   `json:"known"`
	Unknown string `json:"unknown,omitempty"`
	// Synced is set when dirty pages were written back first (fdatasync).
	Synced bool `json:"synced,omitempty"`
	// Before and After are cachestat's counts around the eviction.
	Before Counts `json:"before"`
	After  Counts `json:"after"`
	// DroppedBytes is the cached bytes that went.
	DroppedBytes int64 `json:"dropped_bytes"`
	// KeptPages could not be dropped: Dirty and Writeback of After say
	// how many were dirty or under writeback; the rest are mapped or
	// otherwise in use, by Mappers where they are processes this user
	// may inspect.
	KeptPages uint64   `json:"kept_pages"`
	Mappers   []Mapper `json:"mappers,omitempty"`
}

// Evict drops paths (directories recursively) from the page cache:
// fdatasync for files with dirty pages, then POSIX_FADV_DONTNEED, then
// cachestat to see what went. It never touches other files (no
// drop_caches).
func Evict(a Actor, paths []string) ([]Evicted, []Problem) {
	return eachFile(a, paths, evictOne)
}

func evictOne(fh *os.File, t target) (Evicted, error) {
	e := Evicted{Path: t.path, Size: t.size}
	before, unknown, err := cachestatFile(fh)
	if err != nil {
		return e, err
	}
	e.Known, e.Unknown, e.Before = unknown == "", unknown, before
	// DONTNEED skips dirty pages: write them first. Without cachestat
	// we cannot tell whether any are dirty, and fdatasync of a clean
	// file costs nothing.
	if !e.Known || before.Dirty > 0 || before.Writeback > 0 {
		if err := unix.Fdatasync(int(fh.Fd())); err != nil && !errors.Is(err, unix.EINVAL) {
			return e, fmt.Errorf("write back dirty pages: %w", err)
		}
		e.Synced = e.Known
	}
	if err := unix.Fadvise(int(fh.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return e, fmt.Errorf("posix_fadvise DONTNEED: %w", err)
	}
	if !e.Known {
		return e, nil
	}
	after, err := cachestat(fh, 0, 0)
	if err != nil {
		return e, err
	}
	e.After = after
	if before.Cached > after.Cached {
		e.DroppedBytes = cachedBytes(before.Cached-after.Cached, t.size)
	}
	e.KeptPages = after.Cached
	if after.Cached > after.Dirty+after.Writeback {
		e.Mappers = mappers(t.dev, t.ino)
	}
	return e, nil
}
