package jit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
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
	p := root
	for {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil {
			h.FS, h.Volatile = FSName(int64(st.Type))
			break
		}
		if p == "/" || p == "." || p == "" {
			break
		}
		h.Missing = true
		p = filepath.Dir(p)
	}
	if !h.Missing {
		h.Size, h.Files, h.Capped, h.Unreadable = o.walk(root)
	}
	return h
}

// FSName names a statfs f_type, and says whether that filesystem is lost
// on reboot.
func FSName(t int64) (string, bool) {
	switch t {
	case unix.TMPFS_MAGIC:
		return "tmpfs", true
	case unix.RAMFS_MAGIC:
		return "ramfs", true
	case unix.EXT4_SUPER_MAGIC:
		return "ext4", false
	case unix.XFS_SUPER_MAGIC:
		return "xfs", false
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs", false
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs", false
	case unix.NFS_SUPER_MAGIC:
		return "nfs", false
	case unix.FUSE_SUPER_MAGIC:
		return "fuse", false
	case unix.SQUASHFS_MAGIC:
		return "squashfs", false
	case 0x2fc12fc1:
		return "zfs", false
	case unix.V9FS_MAGIC:
		return "9p", false
	case unix.CIFS_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC:
		return "cifs", false
	}
	return fmt.Sprintf("0x%x", t), false
}
