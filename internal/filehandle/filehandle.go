// Package filehandle follows files across renames: a handle taken while
// a file's name is known (name_to_handle_at) is opened again at the end
// (open_by_handle_at) and the kernel says where the file is now, in any
// directory, or that it was deleted. Opening needs CAP_DAC_READ_SEARCH
// (coldtrace runs as root); a filesystem without export support gives
// no handle, and the caller falls back to its own search.
package filehandle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Key is a file as the probes name it: dev in the kernel's s_dev
// encoding (major<<20 | minor), and the inode's generation where the
// caller has it (a later file given a freed inode number has another);
// stat(2) does not give it, so a path is checked against Dev and Ino.
type Key struct {
	Dev uint32
	Ino uint64
	Gen uint32
}

// sameInode reports whether st is k's inode number on k's device.
func sameInode(st *syscall.Stat_t, k Key) bool {
	o := KeyOf(st)
	return o.Dev == k.Dev && o.Ino == k.Ino
}

// KeyOf is st's file as the probes name it.
func KeyOf(st *syscall.Stat_t) Key {
	return Key{Dev: unix.Major(st.Dev)<<20 | unix.Minor(st.Dev), Ino: st.Ino}
}

// handle is a file's handle and the name it had when it was taken.
type handle struct {
	h     unix.FileHandle
	first string
}

// Store holds the handles taken during a run, at most Max, and one
// directory open per filesystem to open them through. Not safe for
// concurrent use.
type Store struct {
	Max    int
	byKey  map[Key]handle
	mounts map[uint32]int // dev → a directory open on it (open_by_handle_at refuses O_PATH)
	// failed are files no handle could be taken of, so that no caller
	// tries again.
	failed map[Key]bool
	// numbered says, per filesystem asked, whether its handles are an
	// inode's number and generation (TakeByNumber).
	numbered map[uint32]bool
}

// New returns an empty store that keeps at most max handles.
func New(max int) *Store {
	return &Store{Max: max, byKey: map[Key]handle{}, mounts: map[uint32]int{}, failed: map[Key]bool{},
		numbered: map[uint32]bool{}}
}

// Has reports whether k has a handle, or could not get one.
func (s *Store) Has(k Key) bool {
	_, ok := s.byKey[k]
	return ok || s.failed[k]
}

// Len is how many handles the store holds.
func (s *Store) Len() int { return len(s.byKey) }

// Take takes a handle of file k through path (a name of it, or a
// /proc/PID/fd link to it), whose name is now name. It does nothing when
// the store is full or path is no longer k.
func (s *Store) Take(k Key, path, name string) {
	if s.Has(k) || len(s.byKey) >= s.Max {
		return
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		s.failed[k] = true
		return
	}
	// The handle must be k's: the name may have moved on since k was seen.
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil || !sameInode(&st, k) {
		return
	}
	if _, ok := s.mounts[k.Dev]; !ok {
		fd, err := unix.Open(filepath.Dir(name), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			s.failed[k] = true
			return
		}
		s.mounts[k.Dev] = fd
	}
	s.byKey[k] = handle{h: h, first: name}
}

// fileIDIno32Gen is the kernel's generic file handle
// (include/linux/exportfs.h, FILEID_INO32_GEN): the inode's number and
// generation, 32 bits each, as ext4 and others encode theirs.
const fileIDIno32Gen = 1

// fsIocGetversion is FS_IOC_GETVERSION, _IOR('v', 1, long): the inode's
// generation, which stat(2) and statx(2) do not give.
const fsIocGetversion = 0x80087601

// Generation is the generation of the inode open at fd, as the probes
// read it. ext4, xfs and btrfs answer; tmpfs and others do not (ENOTTY),
// though tmpfs keeps one the probes read.
func Generation(fd int) (uint32, error) {
	g, err := unix.IoctlGetInt(fd, fsIocGetversion)
	if err != nil {
		return 0, fmt.Errorf("inode generation: %w", err)
	}
	return uint32(g), nil
}

// TakeByNumber gives file k, whose names went before a handle could be
// taken (an output renamed by its parent within milliseconds), the
// handle its number and generation make, where its filesystem encodes
// handles so: checked once per filesystem on dir, an existing directory
// on it, whose own handle must be exactly its number and generation.
// first is the name k had. Resolve then finds k wherever it is, and
// checks the name it gets.
func (s *Store) TakeByNumber(k Key, first, dir string) bool {
	if _, ok := s.byKey[k]; ok || len(s.byKey) >= s.Max || k.Ino > 1<<32-1 {
		return false
	}
	numbered, known := s.numbered[k.Dev]
	if !known {
		numbered = s.checkNumbered(k.Dev, dir)
		s.numbered[k.Dev] = numbered
	}
	if !numbered {
		return false
	}
	b := make([]byte, 8)
	binary.NativeEndian.PutUint32(b, uint32(k.Ino))
	binary.NativeEndian.PutUint32(b[4:], k.Gen)
	s.byKey[k] = handle{h: unix.NewFileHandle(fileIDIno32Gen, b), first: first}
	delete(s.failed, k)
	return true
}

// checkNumbered says whether filesystem dev's handles are an inode's
// number and generation, from the handle of dir, a directory on it, and
// keeps dir open to open handles through when none is.
func (s *Store) checkNumbered(dev uint32, dir string) bool {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	gen, genErr := Generation(fd)
	h, _, hErr := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH)
	ok := unix.Fstat(fd, &st) == nil && unix.Major(st.Dev)<<20|unix.Minor(st.Dev) == dev && st.Ino <= 1<<32-1 &&
		genErr == nil && hErr == nil && h.Type() == fileIDIno32Gen && h.Size() == 8 &&
		binary.NativeEndian.Uint32(h.Bytes()) == uint32(st.Ino) && binary.NativeEndian.Uint32(h.Bytes()[4:]) == gen
	if _, open := s.mounts[dev]; ok && !open {
		s.mounts[dev] = fd
		return true
	}
	unix.Close(fd)
	return ok
}

// TakeOpen takes a handle of each regular file process pid has open
// that has none yet.
func (s *Store) TakeOpen(pid int32) {
	dir := "/proc/" + strconv.Itoa(int(pid)) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if len(s.byKey) >= s.Max {
			return
		}
		p := filepath.Join(dir, e.Name())
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		k := KeyOf(&st)
		if s.Has(k) {
			continue
		}
		target, err := os.Readlink(p)
		if err != nil || !filepath.IsAbs(target) || strings.HasSuffix(target, " (deleted)") {
			continue
		}
		s.Take(k, p, target)
	}
}

// ErrNoHandle: no handle was taken of the file, or the kernel gave it
// back under no name that is the file.
var ErrNoHandle = errors.New("no file handle")

// Resolve is file k's name now, by its handle: its path, or gone when it
// was deleted. The name is checked to be the file: an inode whose dentry
// left the cache comes back disconnected, under no usable path.
func (s *Store) Resolve(k Key) (path string, gone bool, err error) {
	fh, ok := s.byKey[k]
	if !ok {
		return "", false, ErrNoHandle
	}
	fd, err := unix.OpenByHandleAt(s.mounts[k.Dev], fh.h, unix.O_PATH|unix.O_CLOEXEC)
	if errors.Is(err, unix.ESTALE) {
		return "", true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("open %s by its handle: %w", fh.first, err)
	}
	defer unix.Close(fd)
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", false, fmt.Errorf("read the name of %s: %w", fh.first, err)
	}
	if strings.HasSuffix(target, " (deleted)") {
		return "", true, nil
	}
	var st syscall.Stat_t
	if syscall.Lstat(target, &st) != nil || !sameInode(&st, k) {
		return "", false, ErrNoHandle
	}
	return target, false, nil
}

// First is the name file k had when its handle was taken, or "".
func (s *Store) First(k Key) string { return s.byKey[k].first }

// Keys are the files the store holds handles of.
func (s *Store) Keys() []Key {
	out := make([]Key, 0, len(s.byKey))
	for k := range s.byKey {
		out = append(out, k)
	}
	return out
}

// Close releases the filesystems' descriptors.
func (s *Store) Close() {
	for dev, fd := range s.mounts {
		_ = unix.Close(fd)
		delete(s.mounts, dev)
	}
}
