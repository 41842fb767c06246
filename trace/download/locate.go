package download

import (
	"cmp"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
)

// kernelDev is st_dev in the kernel's s_dev encoding, the one the probes
// and the record use.
func kernelDev(st *syscall.Stat_t) uint32 {
	return unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
}

// sameFile reports whether path names the file (dev, ino) now.
func sameFile(path string, dev uint32, ino uint64) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Ino == ino && kernelDev(st) == dev
}

// finalName is where a file's handle found it at the end of the run
// (taken as root: the locator checks that the command's user sees it).
type finalName struct {
	path  string
	first string
	gone  bool
}

// fileLocator names written files: by their handle (finalname.go) where
// one was taken, wherever they were renamed to; else from the paths the
// core saw them under (the record's file table), searching the
// directory they were written in for a rename into place.
//
// Files the page-cache sensor never saw (tmpfs fills no page cache it
// traces) are named from open, the names Poll found in the writers'
// file descriptors.
func fileLocator(files []record.File, open map[FileKey]string, final map[FileKey]finalName) func(dev uint32, ino uint64) Located {
	type key = FileKey
	seen := make(map[key]string, len(files)+len(open))
	for k, p := range open {
		seen[k] = p
	}
	final = maps.Clone(final)
	if final == nil {
		final = map[key]finalName{}
	}
	for _, f := range files {
		if f.Path == "" {
			continue
		}
		k := key{f.Dev, f.Ino}
		seen[k] = cmp.Or(f.FirstPath, f.Path)
		if _, has := final[k]; f.FirstPath != "" && !has {
			// The page-cache sensor followed its rename.
			final[k] = finalName{path: f.Path, first: f.FirstPath}
		}
	}
	return func(dev uint32, ino uint64) Located {
		k := key{Dev: dev, Ino: ino}
		written, ok := seen[k]
		if fn, has := final[k]; has {
			if !ok {
				written, ok = fn.first, true
			}
			switch {
			case fn.gone:
				return Located{Path: written, Gone: true}
			case fn.path == written && sameFile(written, dev, ino):
				return Located{Path: written}
			case sameFile(fn.path, dev, ino):
				return Located{Path: fn.path, WrittenPath: written}
			}
		}
		if !ok {
			return Located{}
		}
		if sameFile(written, dev, ino) {
			return Located{Path: written}
		}
		if p, found := scanDir(written, dev, ino); found {
			return Located{Path: p, WrittenPath: written}
		}
		// Deleted, or renamed out of its directory: without a handle,
		// which cannot be told.
		return Located{Path: written, NameUnknown: true}
	}
}

// scanDir looks for file (dev, ino) in the directory of written, the
// name it was written under.
func scanDir(written string, dev uint32, ino uint64) (string, bool) {
	entries, err := os.ReadDir(filepath.Dir(written))
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		p := filepath.Join(filepath.Dir(written), e.Name())
		if e.Type().IsRegular() && sameFile(p, dev, ino) {
			return p, true
		}
	}
	return "", false
}

// hubName is the name a Hugging Face hub blob is known by: the path,
// inside a snapshot, of the link that points at it ("model.safetensors"),
// or "" when path is not such a blob or no link points at it yet.
func hubName(path string) string {
	blobs := filepath.Dir(path)
	if filepath.Base(blobs) != "blobs" {
		return ""
	}
	blob, err := os.Stat(path)
	if err != nil {
		return ""
	}
	snapshots := filepath.Join(filepath.Dir(blobs), "snapshots")
	revs, err := os.ReadDir(snapshots)
	if err != nil {
		return ""
	}
	const maxDepth = 4 // files nested inside a repository's folders
	for _, rev := range revs {
		root := filepath.Join(snapshots, rev.Name())
		var name string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() && strings.Count(rel, string(filepath.Separator)) >= maxDepth {
				return filepath.SkipDir
			}
			if d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			if fi, err := os.Stat(p); err == nil && os.SameFile(fi, blob) {
				name = rel
				return filepath.SkipAll
			}
			return nil
		})
		if name != "" {
			return name
		}
	}
	return ""
}

// cacheOf is the name of the cache whose root holds path (the deepest
// root, when caches nest), or "".
func cacheOf(path string, caches []record.Cache) string {
	var name, root string
	for _, c := range caches {
		r := filepath.Clean(c.Root)
		if c.Root == "" || len(r) <= len(root) {
			continue
		}
		if path == r || strings.HasPrefix(path, r+string(filepath.Separator)) {
			name, root = c.Name, r
		}
	}
	return name
}

// FileKey is a file as the probes name it: (dev, ino), dev in the
// kernel's s_dev encoding.
type FileKey struct {
	Dev uint32
	Ino uint64
}

// openPath is the path under which process pid has the file key open, or
// "" when none of its file descriptors is that file.
func openPath(pid uint32, key FileKey) string {
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil || st.Ino != key.Ino || kernelDev(&st) != key.Dev {
			continue
		}
		if target, err := os.Readlink(p); err == nil && filepath.IsAbs(target) {
			return strings.TrimSuffix(target, " (deleted)")
		}
	}
	return ""
}
