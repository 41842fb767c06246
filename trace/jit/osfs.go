package jit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/coldtrace/coldtrace/internal/fstype"
)

// OSFS is FS on the live system. A walk stops after MaxFiles files or
// MaxTime, whichever comes first (a model cache can hold millions).
type OSFS struct {
	MaxFiles int
	MaxTime  time.Duration
}

// DefaultFS walks at most 200,000 files or 2 s per root.
var DefaultFS = OSFS{MaxFiles: 200000, MaxTime: 2 * time.Second}

// Size is a file's size, or the total size of a directory's files.
func (o OSFS) Size(p string) (int64, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, false
	}
	if !fi.IsDir() {
		return fi.Size(), true
	}
	n, _, _, _ := o.walk(p)
	return n, true
}

// IsDir says p is a directory (not followed if it is a link).
func (o OSFS) IsDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// walk totals root's regular files. denied is true when root itself could
// not be listed: then size and files say nothing about it.
func (o OSFS) walk(root string) (size, files int64, capped, denied bool) {
	deadline := time.Now().Add(o.MaxTime)
	errStop := errors.New("stop")
	// The walk's only error is errStop: an unreadable entry is skipped (a
	// cache's size is an estimate), so there is nothing to return.
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrPermission) {
				denied = true
			}
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
			files++
			if (o.MaxFiles > 0 && files >= int64(o.MaxFiles)) || (o.MaxTime > 0 && files%1024 == 0 && time.Now().After(deadline)) {
				capped = true
				return errStop
			}
		}
		return nil
	})
	return size, files, capped, denied
}

// Health describes root: its filesystem (or its nearest existing
// ancestor's, when it is missing) and its size.
func (o OSFS) Health(root string) Health {
	var h Health
	magic, missing, err := fstype.Of(root)
	switch {
	case err == nil:
		h.FS, h.Volatile, h.Missing = fstype.Name(magic), fstype.Volatile(magic), missing
		h.ContainerLayer = fstype.ContainerLayer(magic)
	case errors.Is(err, fs.ErrPermission):
		h.Unreadable = true // behind a directory the user cannot search: it may exist
		return h
	default:
		h.Missing = true
	}
	if !h.Missing {
		h.Size, h.Files, h.Capped, h.Unreadable = o.walk(root)
	}
	return h
}
