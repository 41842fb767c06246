package download

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Final names: a downloader writes under a temporary name and renames
// into place, often into another directory (a Hugging Face blob's
// ".incomplete" in a staging directory, then blobs/<sha256>). While a
// download runs, every regular file its process has open gets a file
// handle (name_to_handle_at); at the end the handle is opened again
// (open_by_handle_at) and the kernel says where the file is now, or that
// it was deleted. Files that got no handle fall back to a scan of the
// directory they were written in.

// maxHandles bounds the handles kept: a process with thousands of files
// open costs no more than this many.
const maxHandles = 4096

// fileHandle is a file's handle and the name it had when it was taken.
type fileHandle struct {
	h     unix.FileHandle
	first string
}

// handles are the handles taken during a run, and one directory per
// filesystem to open them through.
type handles struct {
	byKey  map[FileKey]fileHandle
	mounts map[uint32]int // dev → a directory open on that filesystem (open_by_handle_at refuses O_PATH)
	// failed remembers files no handle could be taken of (a filesystem
	// without export support), so each poll does not try again.
	failed map[FileKey]bool
}

func newHandles() *handles {
	return &handles{byKey: map[FileKey]fileHandle{}, mounts: map[uint32]int{}, failed: map[FileKey]bool{}}
}

// takeOpen takes a handle of each regular file process pid has open
// that has none yet.
func (hs *handles) takeOpen(pid int32) {
	dir := "/proc/" + strconv.Itoa(int(pid)) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if len(hs.byKey) >= maxHandles {
			return
		}
		p := filepath.Join(dir, e.Name())
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		k := FileKey{Dev: kernelDev(&st), Ino: st.Ino}
		if _, ok := hs.byKey[k]; ok || hs.failed[k] {
			continue
		}
		target, err := os.Readlink(p)
		if err != nil || !filepath.IsAbs(target) || strings.HasSuffix(target, " (deleted)") {
			continue
		}
		hs.take(k, p, target)
	}
}

// take takes a handle of file k through fdPath, a /proc/PID/fd link to
// it, whose name is now name.
func (hs *handles) take(k FileKey, fdPath, name string) {
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, fdPath, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		hs.failed[k] = true
		return
	}
	if _, ok := hs.mounts[k.Dev]; !ok {
		fd, err := unix.Open(filepath.Dir(name), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			hs.failed[k] = true
			return
		}
		hs.mounts[k.Dev] = fd
	}
	hs.byKey[k] = fileHandle{h: h, first: name}
}

// errNoHandle: no handle was taken of the file.
var errNoHandle = errors.New("no file handle")

// resolve is file k's name now, by its handle: its path, or gone when it
// was deleted. The name is checked to be the file: an inode whose
// dentry left the cache comes back disconnected, under no usable path.
func (hs *handles) resolve(k FileKey) (path string, gone bool, err error) {
	fh, ok := hs.byKey[k]
	if !ok {
		return "", false, errNoHandle
	}
	fd, err := unix.OpenByHandleAt(hs.mounts[k.Dev], fh.h, unix.O_PATH|unix.O_CLOEXEC)
	if errors.Is(err, unix.ESTALE) {
		return "", true, nil
	}
	if err != nil {
		return "", false, err
	}
	defer unix.Close(fd)
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", false, err
	}
	if strings.HasSuffix(target, " (deleted)") {
		return "", true, nil
	}
	if !sameFile(target, k.Dev, k.Ino) {
		return "", false, errNoHandle
	}
	return target, false, nil
}

// first is the name file k had when its handle was taken, or "".
func (hs *handles) first(k FileKey) string { return hs.byKey[k].first }

// close releases the filesystems' descriptors.
func (hs *handles) close() {
	for dev, fd := range hs.mounts {
		_ = unix.Close(fd)
		delete(hs.mounts, dev)
	}
}
