// Package mountinfo parses the lines of /proc/PID/mountinfo
// (proc_pid_mountinfo(5)): which filesystem is mounted where.
package mountinfo

import (
	"strconv"
	"strings"
)

// Mount is one line.
type Mount struct {
	// Major and Minor are the filesystem's device (st_dev's numbers).
	Major, Minor uint32
	// Root is the directory of the filesystem that is mounted at
	// MountPoint ("/" for the whole of it; a subdirectory for a bind
	// mount or a cgroup namespace).
	Root       string
	MountPoint string
	FSType     string
	// SuperOptions are the filesystem's own options ("rw,memory").
	SuperOptions string
}

// Parse reads one line, "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS
// [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS"; ok is false for anything
// else.
func Parse(line string) (m Mount, ok bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, false
	}
	a, b := strings.Fields(pre), strings.Fields(post)
	if len(a) < 6 || len(b) < 3 {
		return Mount{}, false
	}
	maj, min, ok := strings.Cut(a[2], ":")
	if !ok {
		return Mount{}, false
	}
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(min, 10, 32)
	if err1 != nil || err2 != nil {
		return Mount{}, false
	}
	return Mount{Major: uint32(ma), Minor: uint32(mi), Root: Unescape(a[3]), MountPoint: Unescape(a[4]),
		FSType: b[0], SuperOptions: b[2]}, true
}

// Unescape undoes the octal escapes the kernel writes for space, tab,
// newline and backslash in paths (\040 for a space).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
