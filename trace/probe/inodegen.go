package probe

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// fsIocGetversion is FS_IOC_GETVERSION, _IOR('v', 1, long): the inode's
// generation, which stat(2) and statx(2) do not give.
const fsIocGetversion = 0x80087601

// InodeGeneration is the generation of the inode open at fd, as
// FileKey.Gen holds it. ext4, xfs and btrfs answer; tmpfs and others do
// not (ENOTTY), though tmpfs keeps one the probes read.
func InodeGeneration(fd int) (uint32, error) {
	g, err := unix.IoctlGetInt(fd, fsIocGetversion)
	if err != nil {
		return 0, fmt.Errorf("inode generation: %w", err)
	}
	return uint32(g), nil
}
