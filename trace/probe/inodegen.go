package probe

import "github.com/coldtrace/coldtrace/internal/filehandle"

// InodeGeneration is the generation of the inode open at fd, as
// FileKey.Gen holds it. ext4, xfs and btrfs answer; tmpfs and others do
// not (ENOTTY), though tmpfs keeps one the probes read.
func InodeGeneration(fd int) (uint32, error) { return filehandle.Generation(fd) }
