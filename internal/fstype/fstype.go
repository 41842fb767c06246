// Package fstype names a filesystem from statfs(2) and says whether what
// it holds survives a reboot or a container's replacement. The JIT
// sensor (a cache's health at the end of a run) and residency (a cache
// root's facts now) both ask; the answer lives here once.
package fstype

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// zfsMagic is ZFS's f_type; x/sys/unix has no constant for it (ZFS is
// out of tree).
const zfsMagic = 0x2fc12fc1

// Name names a statfs f_type as /proc/mounts does ("ext4", "tmpfs",
// "overlay"); an unknown type is its number in hex.
func Name(t int64) string {
	switch t {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.RAMFS_MAGIC:
		return "ramfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	case unix.EXT4_SUPER_MAGIC: // ext2 and ext3 share it
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case unix.FUSE_SUPER_MAGIC:
		return "fuse"
	case unix.SQUASHFS_MAGIC:
		return "squashfs"
	case zfsMagic:
		return "zfs"
	case unix.V9FS_MAGIC:
		return "9p"
	case unix.CIFS_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC:
		return "cifs"
	}
	return fmt.Sprintf("0x%x", t)
}

// Volatile reports a filesystem held in memory: its files are lost at
// reboot (tmpfs, ramfs).
func Volatile(t int64) bool {
	return t == unix.TMPFS_MAGIC || t == unix.RAMFS_MAGIC
}

// ContainerLayer reports an overlay filesystem: where a cache lives, it
// is a container's writable layer (overlay's upper directory), lost when
// the container is replaced, so a new container starts cold.
func ContainerLayer(t int64) bool {
	return t == unix.OVERLAYFS_SUPER_MAGIC
}

// Of is the statfs f_type of path, or its nearest existing ancestor when path does not
// exist (where it would be created); missing says that happened. Only a
// path that is not there (ENOENT, ENOTDIR) is missing: one the caller may
// not reach (EACCES) may well exist, so that is an error, never "missing".
func Of(path string) (magic int64, missing bool, err error) {
	p := path
	for {
		var st unix.Statfs_t
		serr := unix.Statfs(p, &st)
		if serr == nil {
			return int64(st.Type), missing, nil
		}
		absent := errors.Is(serr, unix.ENOENT) || errors.Is(serr, unix.ENOTDIR)
		if !absent || p == "/" || p == "." || p == "" {
			return 0, missing, fmt.Errorf("statfs %s: %w", path, serr)
		}
		missing = true
		p = filepath.Dir(p)
	}
}
