package pagecache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/filehandle"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// maxHandles bounds the file handles kept for files the run created: a
// build that writes a hundred thousand files costs no more than this
// many name_to_handle_at calls and handles.
const maxHandles = 16384

// followRename names rf, a file no longer at its path at the end of the
// run, by where its handle (taken when the run created it) finds it now:
// a file written under a temporary name and renamed, in any directory,
// is named by its final name, its first name in FirstPath. A file seen
// through another mount namespace (HostPath set) keeps its names.
func (s *Sensor) followRename(key probe.FileKey, rf *record.File) {
	if rf.HostPath != "" {
		return
	}
	k := filehandle.Key{Dev: key.Dev, Ino: key.Ino, Gen: key.Gen}
	path, gone, err := s.handles.Resolve(k)
	if errors.Is(err, filehandle.ErrNoHandle) && s.handles.TakeByNumber(k, rf.Path, existingDir(rf.Path)) {
		// No handle: the name was gone before it could be taken (a
		// compiler's output renamed by its parent within
		// milliseconds). Its filesystem makes handles of the numbers
		// the probes have.
		path, gone, err = s.handles.Resolve(k)
	}
	if errors.Is(err, filehandle.ErrNoHandle) {
		// Look for the inode in the directories the run's files are in.
		path, err = s.scannedName(key, rf.Path), nil
	}
	if err != nil || gone || path == "" || path == rf.Path {
		return
	}
	rf.FirstPath, rf.Path = rf.Path, path
	if size, ok := statMatches(path, key.Ino); ok {
		rf.SizeBytes = size
	}
}

// existingDir is the deepest directory above path that exists: where
// the file's first name was, or what is left of it.
func existingDir(path string) string {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(dir); (err == nil && st.IsDir()) || dir == "/" || dir == "." {
			return dir
		}
	}
}

// bornSince says whether the file at path was born (statx's btime) at or
// after t; ok is false when that cannot be told (no such file, or a
// filesystem that keeps no birth time).
func bornSince(path string, t time.Time) (born, ok bool) {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_BTIME == 0 {
		return false, false
	}
	return !time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)).Before(t), true
}

// changedBefore says whether an inode whose change time is ctimeSec
// (seconds since the epoch, as the path record carries it; 0: unknown)
// last changed in a second before t's: then it was born before t too (a
// birth is a change), with no statx to tell.
func changedBefore(ctimeSec uint32, t time.Time) bool {
	return ctimeSec != 0 && int64(ctimeSec) < t.Unix()
}

// maxScanDirs bounds the directories read to find renamed files without a
// handle.
const maxScanDirs = 4096

// maxSiblingDirs bounds the directories beside a renamed file's first
// one that are read for it.
const maxSiblingDirs = 64

// scannedName is where a file of the run, first named first, is now,
// found by its inode among the entries of the directories the run's files
// were seen in (read once, on the first file that needs it), else among
// those of the directories beside its first one (a staging directory
// renamed from into the cache beside it: ".cache/x-stage" into
// ".cache/x"), or "".
func (s *Sensor) scannedName(key probe.FileKey, first string) string {
	if s.byIno == nil {
		s.byIno = map[uint64][]string{}
		s.scanned = map[string]bool{}
		for _, f := range s.fileOrder {
			if len(s.scanned) >= maxScanDirs {
				break
			}
			if p := s.pathOf(f); filepath.IsAbs(p) && !s.scanned[filepath.Dir(p)] {
				s.scanned[filepath.Dir(p)] = true
				scanDir(filepath.Dir(p), s.byIno)
			}
		}
	}
	if p := s.inoAt(key); p != "" || !filepath.IsAbs(first) {
		return p
	}
	parent := filepath.Dir(filepath.Dir(first))
	entries, err := os.ReadDir(parent)
	if err != nil {
		return ""
	}
	read := 0
	for _, e := range entries {
		d := filepath.Join(parent, e.Name())
		if !e.IsDir() || s.scanned[d] || read >= maxSiblingDirs {
			continue
		}
		s.scanned[d] = true
		read++
		scanDir(d, s.byIno)
	}
	return s.inoAt(key)
}

// inoAt is the path among those scanned that is file key now, or "".
func (s *Sensor) inoAt(key probe.FileKey) string {
	for _, p := range s.byIno[key.Ino] {
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil && filehandle.KeyOf(&st) == (filehandle.Key{Dev: key.Dev, Ino: key.Ino}) {
			return p
		}
	}
	return ""
}

// scanDir adds the entries of dir to byIno by inode number, as
// getdents64 gives them (no stat per entry: /usr/lib holds thousands).
func scanDir(dir string, byIno map[uint64][]string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil || n <= 0 {
			return
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if typ := b[18]; typ == unix.DT_REG || typ == unix.DT_UNKNOWN {
				ino := binary.NativeEndian.Uint64(b[0:8])
				byIno[ino] = append(byIno[ino], filepath.Join(dir, string(name)))
			}
			b = b[reclen:]
		}
	}
}
