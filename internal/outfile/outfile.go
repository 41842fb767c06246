// Package outfile writes coldtrace's output files safely as root: only
// regular files are created or replaced, with the rights of the user
// coldtrace acts for (internal/actor), and a failed write leaves the old
// file whole.
//
// A new file is created by that user, mode 0666 minus their umask. An
// existing regular file keeps its mode and owner: it is replaced through a
// temporary file in the same directory (random name, O_EXCL, fsync, then
// an atomic exchange that checks the file it replaces is still the one
// checked) when the user may write the directory and may give the new
// file the old owner; otherwise it is truncated and written in place, as
// shell redirection would. A device node, FIFO, socket, directory or
// symbolic link as an output is refused with one line; coldtrace never
// opens one (it looks with lstat, and opens only with O_NOFOLLOW and
// O_NONBLOCK, so even a file swapped in between cannot block it).
package outfile

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// Stdout is the path that names standard output.
const Stdout = "-"

// NotRegularError is an output path that names something other than a
// regular file.
type NotRegularError struct {
	Path string
	Kind string // "character device", "symbolic link", ...
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is a %s; coldtrace replaces only regular files (use - for stdout)", e.Path, e.Kind)
}

// Write creates or replaces the regular file path with what write
// produces, with a's rights. write's output is buffered; path is untouched
// when write fails.
func Write(a actor.Actor, path string, write func(io.Writer) error) error {
	if path == "" || path == Stdout {
		return fmt.Errorf("write %q: not a file path", path)
	}
	err := a.Do(func() error { return writeAs(a, path, write) })
	var nr *NotRegularError
	if errors.As(err, &nr) {
		return err
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeAs(a actor.Actor, path string, write func(io.Writer) error) error {
	dir, err := openParent(path)
	if err != nil {
		return err
	}
	defer dir.close()
	// Two tries: a file that appears between the look and the rename is
	// looked at again rather than replaced unseen.
	for try := 0; ; try++ {
		var st unix.Stat_t
		err := unix.Fstatat(dir.fd, dir.base, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			err = dir.createNew(0o666&^a.Umask, write)
			if errors.Is(err, unix.EEXIST) && try == 0 {
				continue
			}
			return err
		case err != nil:
			return err
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			return &NotRegularError{Path: path, Kind: kindOf(st.Mode)}
		default:
			return dir.replace(a, &st, write)
		}
	}
}

// parent is the directory of an output, held open so that every step
// names the same directory.
type parent struct {
	fd   int
	name string // the directory's absolute path
	base string
	sync bool // fd can be fsynced
}

func openParent(path string) (*parent, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dirName, base := filepath.Split(abs)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("names a directory")
	}
	fd, err := unix.Open(dirName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	sync := true
	if errors.Is(err, unix.EACCES) {
		// A directory one may write but not list (0733) can still take
		// the file; it only cannot be fsynced.
		fd, err = unix.Open(dirName, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		sync = false
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open directory", Path: dirName, Err: err}
	}
	return &parent{fd: fd, name: dirName, base: base, sync: sync}, nil
}

func (p *parent) close() { unix.Close(p.fd) }

// createNew writes a new file and links it in only if the name is still
// free (EEXIST otherwise).
func (p *parent) createNew(mode uint32, write func(io.Writer) error) error {
	tmp, err := p.createTemp()
	if err != nil {
		return err
	}
	if err := tmp.fill(write, mode); err != nil {
		return p.discard(tmp, err)
	}
	err = unix.Renameat2(p.fd, tmp.name, p.fd, p.base, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// No RENAME_NOREPLACE on this filesystem: a hard link also
		// refuses an existing name.
		if err = unix.Linkat(p.fd, tmp.name, p.fd, p.base, 0); err == nil {
			err = unix.Unlinkat(p.fd, tmp.name, 0)
		}
	}
	if err != nil {
		return p.discard(tmp, err)
	}
	return p.syncDir()
}

// replace writes over the regular file st, keeping its mode and owner.
func (p *parent) replace(a actor.Actor, st *unix.Stat_t, write func(io.Writer) error) error {
	if err := p.mayWrite(); err != nil {
		return err
	}
	mode := st.Mode & 0o777
	if a.IsRoot() || st.Uid == a.UID {
		tmp, err := p.createTemp()
		if err == nil {
			if err := unix.Fchown(tmp.fd, int(st.Uid), int(st.Gid)); err != nil {
				// The user may not give the file its old group: write
				// in place, which keeps it.
				p.discard(tmp, nil)
				return p.inPlace(st, write)
			}
			if err := tmp.fill(write, mode); err != nil {
				return p.discard(tmp, err)
			}
			return p.exchange(tmp, st)
		}
		if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EROFS) {
			return err
		}
		// The directory is not the user's to write; the file is.
	}
	return p.inPlace(st, write)
}

// exchange swaps tmp in for the file st and removes st, or swaps back
// when the name no longer held st.
func (p *parent) exchange(tmp *tempFile, st *unix.Stat_t) error {
	err := unix.Renameat2(p.fd, tmp.name, p.fd, p.base, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// No exchange on this filesystem: a plain rename.
		if err := unix.Renameat(p.fd, tmp.name, p.fd, p.base); err != nil {
			return p.discard(tmp, err)
		}
		return p.syncDir()
	}
	if err != nil {
		return p.discard(tmp, err)
	}
	// tmp.name now holds what was at base.
	var old unix.Stat_t
	if err := unix.Fstatat(p.fd, tmp.name, &old, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("check the replaced file: %w", err)
	}
	if old.Dev != st.Dev || old.Ino != st.Ino {
		if err := unix.Renameat2(p.fd, tmp.name, p.fd, p.base, unix.RENAME_EXCHANGE); err != nil {
			return fmt.Errorf("%s changed while it was written, and putting it back failed: %w", p.base, err)
		}
		p.discard(tmp, nil)
		return fmt.Errorf("%s changed while it was written; left as it was", p.base)
	}
	if err := unix.Unlinkat(p.fd, tmp.name, 0); err != nil {
		return fmt.Errorf("remove the replaced file: %w", err)
	}
	return p.syncDir()
}

// inPlace truncates and writes the file st, which is still that file.
func (p *parent) inPlace(st *unix.Stat_t, write func(io.Writer) error) error {
	fd, err := unix.Openat(p.fd, p.base, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), p.base)
	defer f.Close()
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return err
	}
	if now.Dev != st.Dev || now.Ino != st.Ino {
		return fmt.Errorf("%s changed while it was written; left as it was", p.base)
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if err := fill(f, write); err != nil {
		return err
	}
	return f.Sync()
}

// mayWrite checks that the user may write the existing file base: an
// output one may not write stays unwritten even where the directory
// would let it be replaced.
func (p *parent) mayWrite() error {
	err := unix.Faccessat2(p.fd, p.base, unix.W_OK, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.8: ask by opening it for writing, without
		// truncating.
		var fd int
		fd, err = unix.Openat(p.fd, p.base, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
	}
	return err
}

func (p *parent) syncDir() error {
	if !p.sync {
		return nil
	}
	if err := unix.Fsync(p.fd); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// discard removes tmp and returns err.
func (p *parent) discard(tmp *tempFile, err error) error {
	tmp.close()
	if rerr := unix.Unlinkat(p.fd, tmp.name, 0); rerr != nil && !errors.Is(rerr, unix.ENOENT) {
		return errors.Join(err, fmt.Errorf("remove temporary %s: %w", tmp.name, rerr))
	}
	return err
}

type tempFile struct {
	name string
	fd   int
	f    *os.File
}

// createTemp creates a new 0600 file with a random name next to the
// output, so that the final rename stays in one directory.
func (p *parent) createTemp() (*tempFile, error) {
	base := p.base
	if len(base) > 200 {
		base = base[:200]
	}
	for range 10 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		name := "." + base + "." + hex.EncodeToString(b[:]) + ".tmp"
		fd, err := unix.Openat(p.fd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &tempFile{name: name, fd: fd, f: os.NewFile(uintptr(fd), name)}, nil
	}
	return nil, errors.New("no free temporary name")
}

// fill writes the content, sets the final mode, syncs and closes.
func (t *tempFile) fill(write func(io.Writer) error, mode uint32) error {
	defer t.close()
	if err := fill(t.f, write); err != nil {
		return err
	}
	if err := unix.Fchmod(t.fd, mode); err != nil {
		return fmt.Errorf("chmod %#o: %w", mode, err)
	}
	if err := t.f.Sync(); err != nil {
		return err
	}
	f := t.f
	t.f = nil
	return f.Close()
}

func (t *tempFile) close() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}

func fill(f *os.File, write func(io.Writer) error) error {
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	}
	return fmt.Sprintf("file of type %#o", mode&unix.S_IFMT)
}
