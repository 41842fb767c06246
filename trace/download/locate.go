package download

import (
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// kernelDev is st_dev in the kernel's s_dev encoding, the one the probes
// and the record use.
func kernelDev(st *syscall.Stat_t) uint32 {
	return unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
}

// sameFile reports whether path names file k now: its device and
// number, and its generation where k has one and the filesystem gives
// it (ext4, xfs and btrfs do), so that a file given k's number after k
// was deleted (a retried download's new temporary file) is not taken for
// k. It runs with the command's user's rights (Finish's rights.Do).
func sameFile(path string, k FileKey) bool {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || st.Ino != k.Ino || unix.Major(st.Dev)<<20|unix.Minor(st.Dev) != k.Dev {
		return false
	}
	if k.Gen == 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return true
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true // not readable by the user: the number decides
	}
	defer unix.Close(fd)
	var again unix.Stat_t
	if unix.Fstat(fd, &again) != nil || again.Ino != st.Ino || again.Dev != st.Dev {
		return false
	}
	gen, err := probe.InodeGeneration(fd)
	return err != nil || gen == k.Gen
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
//
// Handles are kept by inode number (final); when the run saw one number
// name two files (one deleted, then its number given to a new one),
// every name is checked against the generation, and a handle that found
// its file deleted says nothing about which of the two it was.
func fileLocator(files []record.File, open map[FileKey]string, final map[FileKey]finalName) func(FileKey) Located {
	seen := make(map[FileKey]string, len(files)+len(open))
	for k, p := range open {
		seen[k] = p
	}
	followed := map[FileKey]finalName{} // renames the page-cache sensor followed
	for _, f := range files {
		if f.Path == "" {
			continue
		}
		k := FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen}
		seen[k] = cmp.Or(f.FirstPath, f.Path)
		if f.FirstPath != "" {
			followed[k] = finalName{path: f.Path, first: f.FirstPath}
		}
	}
	byNumber := map[FileKey][]FileKey{}
	for k := range seen {
		byNumber[k.number()] = append(byNumber[k.number()], k)
	}
	// heldByAnother reports whether k's number names, now, another file
	// the run saw under it: then k was deleted.
	heldByAnother := func(k FileKey) bool {
		for _, o := range byNumber[k.number()] {
			if o == k {
				continue
			}
			if sameFile(seen[o], o) || (followed[o].path != "" && sameFile(followed[o].path, o)) {
				return true
			}
		}
		return false
	}
	return func(k FileKey) Located {
		reused := len(byNumber[k.number()]) > 1
		written, ok := seen[k]
		fn, has := final[k.number()]
		if !has || (fn.gone && reused) {
			fn, has = followed[k]
		}
		if has {
			if !ok {
				written, ok = fn.first, true
			}
			switch {
			case fn.gone:
				return Located{Path: written, Gone: true}
			case fn.path == written && sameFile(written, k):
				return Located{Path: written}
			case sameFile(fn.path, k):
				return Located{Path: fn.path, WrittenPath: written}
			}
		}
		if !ok {
			return Located{}
		}
		if sameFile(written, k) {
			return Located{Path: written}
		}
		if p, found := scanDir(written, k); found {
			return Located{Path: p, WrittenPath: written}
		}
		if reused && heldByAnother(k) {
			return Located{Path: written, Gone: true}
		}
		// Deleted, or renamed out of its directory: without a handle,
		// which cannot be told.
		return Located{Path: written, NameUnknown: true}
	}
}

// scanDir looks for file k in the directory of written, the name it was
// written under.
func scanDir(written string, k FileKey) (string, bool) {
	entries, err := os.ReadDir(filepath.Dir(written))
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		p := filepath.Join(filepath.Dir(written), e.Name())
		if e.Type().IsRegular() && sameFile(p, k) {
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

// keptCopy is the file of a known cache that holds d's body beside its
// destination outside any cache: one its receiving threads wrote, there
// at the end, whose size is the body's within the tolerance (pip keeps
// the response it received a wheel in, headers and all, in its HTTP
// cache). Of several, the closest in size; nil when none.
func keptCopy(d record.Download, caches []record.Cache) *record.DownloadFile {
	var best *record.DownloadFile
	var bestDiff uint64
	for i := 1; i < len(d.Files); i++ {
		f := d.Files[i]
		if f.Gone || f.NameUnknown || f.Path == "" || cacheOf(f.Path, caches) == "" {
			continue
		}
		diff, ok := holdsBody(f.BytesWritten, d.Bytes)
		if !ok || (best != nil && diff >= bestDiff) {
			continue
		}
		best, bestDiff = &f, diff
	}
	return best
}

// pageSlack is the most a file's written bytes, counted in pages, exceed
// what was written.
const pageSlack = 64 << 10

// holdsBody reports whether a file of written bytes (whole pages) holds a
// body received as body bytes (fits), and how far the two are.
func holdsBody(written, body uint64) (diff uint64, ok bool) {
	diff = max(written, body) - min(written, body)
	return diff, fits(written, body, pageSlack)
}

// FileKey is a file as the probes name it: (dev, ino, gen), dev in the
// kernel's s_dev encoding, gen the inode's generation (a file given a
// deleted one's number has another; 0 where it is not known: tmpfs
// files, measured by stat, which gives none, and whose numbers a mount
// does not reuse).
type FileKey struct {
	Dev uint32
	Ino uint64
	Gen uint32
}

// number is k without its generation: the file handles and stat(2)
// name files so.
func (k FileKey) number() FileKey { return FileKey{Dev: k.Dev, Ino: k.Ino} }

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
