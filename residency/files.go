package residency

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Problem is one path that could not be handled; the others still are.
type Problem struct {
	Path string
	Err  error
}

func (p Problem) Error() string { return fmt.Sprintf("%s: %v", p.Path, p.Err) }

// ErrNotRegular is the problem of a path that is neither a regular file
// nor a directory (a device, socket or FIFO has no page cache to speak of).
var ErrNotRegular = errors.New("not a regular file or directory")

// target is one regular file to work on.
type target struct {
	path     string
	size     int64
	dev, ino uint64
}

// expand turns paths into regular files: a file as given (a symbolic link
// to one is followed), a directory recursively (links inside it are not
// followed, so nothing is counted twice and no loop is walked). A file
// reached twice (a hard link, a path given twice) is kept once, where it
// first appeared. It must run inside the Actor.
func expand(paths []string) ([]target, []Problem) {
	var out []target
	var probs []Problem
	seen := map[[2]uint64]bool{}
	add := func(p string, fi fs.FileInfo) {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			probs = append(probs, Problem{p, errors.New("no inode information")})
			return
		}
		key := [2]uint64{st.Dev, st.Ino}
		if seen[key] {
			return
		}
		seen[key] = true
		out = append(out, target{path: p, size: fi.Size(), dev: st.Dev, ino: st.Ino})
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			probs = append(probs, Problem{p, unwrapPath(err)})
			continue
		}
		switch {
		case fi.Mode().IsRegular():
			add(p, fi)
		case fi.IsDir():
			err := filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
				if err != nil {
					probs = append(probs, Problem{q, unwrapPath(err)})
					return nil // WalkDir skips what it could not read
				}
				if !d.Type().IsRegular() {
					return nil
				}
				info, err := d.Info()
				if err != nil {
					probs = append(probs, Problem{q, unwrapPath(err)})
					return nil
				}
				add(q, info)
				return nil
			})
			if err != nil {
				probs = append(probs, Problem{p, err})
			}
		default:
			probs = append(probs, Problem{p, fmt.Errorf("%w (%s)", ErrNotRegular, fi.Mode().Type())})
		}
	}
	return out, probs
}

// unwrapPath drops the *PathError around err: Problem names the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// File is one file's page-cache residency now.
type File struct {
	Path  string `json:"path"`
	Size  int64  `json:"size_bytes"`
	Pages uint64 `json:"pages"`
	// Known is false when the kernel would not say (Unknown says why):
	// then Counts and CachedBytes are zero and mean nothing.
	Known   bool   `json:"known"`
	Unknown string `json:"unknown,omitempty"`
	Counts
	CachedBytes int64 `json:"cached_bytes"`

	dev, ino uint64
}

// Fraction is the cached share of the file's pages, 1 for an empty file.
func (f File) Fraction() float64 {
	if f.Pages == 0 {
		return 1
	}
	return float64(f.Cached) / float64(f.Pages)
}

// Stat reports the residency of paths (directories recursively), with the
// rights of a.
func Stat(a Actor, paths []string) ([]File, []Problem) {
	return eachFile(a, paths, statOpen)
}

// eachFile opens every regular file below paths (directories
// recursively), with the rights of a, and hands it to do. A path that
// cannot be opened, or that do fails on, is a Problem; the other results
// come back in order.
func eachFile[T any](a Actor, paths []string, do func(fh *os.File, t target) (T, error)) ([]T, []Problem) {
	var out []T
	var probs []Problem
	err := a.Do(func() error {
		targets, p := expand(paths)
		probs = p
		for _, t := range targets {
			v, err := openAndDo(t, do)
			if err != nil {
				probs = append(probs, Problem{t.path, err})
				continue
			}
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		probs = append(probs, Problem{"(all)", err})
	}
	return out, probs
}

func openAndDo[T any](t target, do func(fh *os.File, t target) (T, error)) (T, error) {
	fh, err := openRegular(t.path)
	if err != nil {
		var zero T
		return zero, unwrapPath(err)
	}
	defer fh.Close()
	return do(fh, t)
}

// statOpen asks cachestat about the open file t.
func statOpen(fh *os.File, t target) (File, error) {
	f := File{Path: t.path, Size: t.size, Pages: pagesOf(t.size), dev: t.dev, ino: t.ino}
	c, unknown, err := cachestatFile(fh)
	if err != nil {
		return File{}, err
	}
	if unknown != "" {
		f.Unknown = unknown
		return f, nil
	}
	f.Known, f.Counts, f.CachedBytes = true, c, cachedBytes(c.Cached, t.size)
	return f, nil
}
