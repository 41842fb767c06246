package attribution

import "github.com/coldtrace/coldtrace/record"

// Fate says whether a warm rerun would download again what a run
// downloaded: it would not only when the data landed in a cache that
// survives (docs/definitions.md, "Does a cache survive?") and stayed there.
type Fate string

// The fates of a download.
const (
	// FateKept: written into a persistent cache and still there; a warm
	// rerun finds it and skips the download.
	FateKept Fate = "kept"
	// FateMemory: the data never reached a file.
	FateMemory Fate = "memory"
	// FateDeleted: a file it was written to was gone at the end of the
	// run (a temporary file).
	FateDeleted Fate = "deleted"
	// FateVolatile: the cache is on tmpfs or ramfs, lost at reboot.
	FateVolatile Fate = "volatile"
	// FateContainer: the cache is in an overlay filesystem, a container's
	// writable layer, lost when the container is replaced.
	FateContainer Fate = "container_layer"
	// FateNoCache: written outside any cache coldtrace knows; whether the
	// program looks there before downloading again is unknown.
	FateNoCache Fate = "no_cache"
	// FateNotSeen: written, but to no one file whose writes followed the
	// received bytes (record.DestNotSeen).
	FateNotSeen Fate = "not_seen"
	// FateNameUnknown: its file was renamed and its final name could not
	// be found; whether it survived is unknown.
	FateNameUnknown Fate = "name_unknown"
)

// Kept reports whether a warm rerun skips the download.
func (f Fate) Kept() bool { return f == FateKept }

// FateOf decides what a warm rerun would do about download d of r, and
// returns the record's cache it landed in, when there is one. Only the
// destination decides: a journal or log the receiving thread also wrote
// and deleted does not make a kept download "fetched again". Records
// made before destinations were matched (no Destination) count any of
// the download's files deleted.
func FateOf(r *record.Record, d record.Download) (Fate, *record.Cache) {
	if d.Destination == record.DestNotSeen {
		return FateNotSeen, nil
	}
	if d.Path == "" {
		return FateMemory, nil
	}
	files := d.Files
	if d.Destination != "" && d.Destination != record.DestUnpacked && len(files) > 0 {
		files = files[:1] // an unpacked archive's files are all its body
	}
	if d.KeptIn != nil {
		// The destination's fate is not the body's: its copy in a
		// cache is what a rerun reads.
		files = []record.DownloadFile{*d.KeptIn}
	}
	for _, f := range files {
		switch {
		case f.Gone:
			return FateDeleted, nil
		case f.NameUnknown:
			return FateNameUnknown, nil
		}
	}
	var c *record.Cache
	if r.JIT != nil && d.Cache != "" {
		for i := range r.JIT.Caches {
			if r.JIT.Caches[i].Name == d.Cache {
				c = &r.JIT.Caches[i]
				break
			}
		}
	}
	switch {
	case c == nil:
		return FateNoCache, nil
	case c.Volatile || c.FS == "tmpfs" || c.FS == "ramfs" || c.Survival == "lost at reboot":
		return FateVolatile, c
	case c.ContainerLayer || c.FS == "overlay" || c.FS == "overlayfs" || c.Survival == "container layer":
		// The caches table's survival says the same (one story).
		return FateContainer, c
	}
	return FateKept, c
}
