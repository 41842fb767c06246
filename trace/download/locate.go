package download

import (
	"io/fs"
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

// fileLocator names written files from the paths the core saw them under
// (the record's file table). Downloaders write under a temporary name and
// rename into place in the same directory (a Hugging Face blob's
// ".incomplete", torch.hub's temporary file): the directory is searched
// for the inode's final name.
//
// Files the page-cache sensor never saw (tmpfs fills no page cache it
// traces) are named from open, the names Poll found in the writers'
// file descriptors.
func fileLocator(files []record.File, open map[FileKey]string) func(dev uint32, ino uint64) (string, string, bool) {
	type key = FileKey
	seen := make(map[key]string, len(files)+len(open))
	for k, p := range open {
		seen[k] = p
	}
	for _, f := range files {
		if f.Path != "" {
			seen[key{f.Dev, f.Ino}] = f.Path
		}
	}
	return func(dev uint32, ino uint64) (string, string, bool) {
		written, ok := seen[key{Dev: dev, Ino: ino}]
		if !ok {
			return "", "", false
		}
		if sameFile(written, dev, ino) {
			return written, "", false
		}
		entries, err := os.ReadDir(filepath.Dir(written))
		if err != nil {
			return written, "", true
		}
		for _, e := range entries {
			p := filepath.Join(filepath.Dir(written), e.Name())
			if e.Type().IsRegular() && sameFile(p, dev, ino) {
				return p, written, false
			}
		}
		return written, "", true
	}
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
