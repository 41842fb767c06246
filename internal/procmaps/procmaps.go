// Package procmaps reads a process's file mappings from /proc/PID/maps
// and opens a mapped file through /proc/PID/map_files, so that a
// privileged reader gets the very inode the process mapped: a path the
// process named is never opened or stat'ed, and swapping that path for a
// symlink to another file afterwards changes nothing.
package procmaps

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one file-backed line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64
	Perms      string
	Offset     uint64
	Major      uint32
	Minor      uint32
	Inode      uint64
	// Path is the file's path as the kernel prints it, in the process's
	// mount namespace: a name for display and matching only, never one
	// to open. A deleted file keeps its " (deleted)" suffix.
	Path string
}

// Exec says whether the mapping is executable.
func (m Mapping) Exec() bool { return strings.Contains(m.Perms, "x") }

// ErrNotSameFile is returned by Open when the file behind the mapping is
// not the one /proc/PID/maps listed (the process unmapped it and mapped
// another at the same place meanwhile).
var ErrNotSameFile = errors.New("mapped file changed")

// maxLine bounds one line of maps: a path is at most PATH_MAX.
const maxLine = 64 << 10

// Parse reads maps lines from r and returns the file-backed ones (an
// inode other than 0); anonymous, [heap]-like and malformed lines are
// skipped.
func Parse(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for sc.Scan() {
		if m, ok := parseLine(sc.Bytes()); ok {
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read maps: %w", err)
	}
	return out, nil
}

// parseLine parses "start-end perms offset major:minor inode    path".
// The path is everything after the inode's padding, spaces included.
func parseLine(line []byte) (Mapping, bool) {
	var m Mapping
	rest := line
	field := func() string {
		rest = bytes.TrimLeft(rest, " ")
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			f := string(rest)
			rest = nil
			return f
		}
		f := string(rest[:i])
		rest = rest[i+1:]
		return f
	}
	rng, perms, off, dev, ino := field(), field(), field(), field(), field()
	lo, hi, ok1 := strings.Cut(rng, "-")
	maj, min, ok2 := strings.Cut(dev, ":")
	if !ok1 || !ok2 {
		return m, false
	}
	var errs [6]error
	m.Start, errs[0] = strconv.ParseUint(lo, 16, 64)
	m.End, errs[1] = strconv.ParseUint(hi, 16, 64)
	m.Offset, errs[2] = strconv.ParseUint(off, 16, 64)
	major, e3 := strconv.ParseUint(maj, 16, 32)
	minor, e4 := strconv.ParseUint(min, 16, 32)
	errs[3], errs[4] = e3, e4
	m.Inode, errs[5] = strconv.ParseUint(ino, 10, 64)
	if errors.Join(errs[:]...) != nil || m.Inode == 0 || m.End <= m.Start {
		return Mapping{}, false
	}
	m.Major, m.Minor, m.Perms = uint32(major), uint32(minor), perms
	m.Path = string(bytes.TrimLeft(rest, " "))
	return m, true
}

// Read returns pid's file-backed mappings.
func Read(pid int) ([]Mapping, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, fmt.Errorf("maps of pid %d: %w", pid, err)
	}
	defer f.Close()
	return Parse(f)
}

// FilesPath is the map_files entry of mapping m of pid.
func FilesPath(pid int, m Mapping) string {
	return fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End)
}

// Open opens the file behind mapping m of pid, read-only, through
// /proc/PID/map_files (which needs CAP_SYS_ADMIN: root's), and checks
// that it is the file maps listed: same device and inode. The result is
// the inode the process mapped, whatever its path names now.
func Open(pid int, m Mapping) (*os.File, error) {
	p := FilesPath(pid, m)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if !m.Same(st.Dev, st.Ino) || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", p, ErrNotSameFile)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// Same says whether a stat's device and inode are the mapping's.
func (m Mapping) Same(dev, ino uint64) bool {
	return unix.Major(dev) == m.Major && unix.Minor(dev) == m.Minor && ino == m.Inode
}
