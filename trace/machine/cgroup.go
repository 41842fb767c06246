package machine

import (
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// MemoryCgroup reads a /proc/PID/cgroup text: the cgroup v1 memory
// hierarchy's path when there is one (version 1), else the v2 path
// (version 2); version 0 when neither is listed.
func MemoryCgroup(text string) (version int, p string) {
	for _, line := range strings.Split(text, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			version, p = 2, parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return 1, parts[2]
			}
		}
	}
	return version, p
}

// limits are the memory limit and high mark of a cgroup, the lowest
// along its path to the root (a parent's limit bounds its children);
// 0 when none is set or the files cannot be read.
func limits(version int, p string) (limit, high uint64) {
	root := mountOf(version)
	if root == "" {
		return 0, 0
	}
	for dir := path.Clean("/" + p); ; dir = path.Dir(dir) {
		if version == 1 {
			limit = lowest(limit, readLimit(path.Join(root, dir, "memory.limit_in_bytes")))
		} else {
			limit = lowest(limit, readLimit(path.Join(root, dir, "memory.max")))
			high = lowest(high, readLimit(path.Join(root, dir, "memory.high")))
		}
		if dir == "/" {
			return limit, high
		}
	}
}

// unlimited: cgroup v1 reports no limit as the largest page-aligned
// int64 (9223372036854771712); anything at or above 2^62 means none.
const unlimited = 1 << 62

func readLimit(file string) uint64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v >= unlimited {
		return 0
	}
	return v
}

func lowest(a, b uint64) uint64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// mountOf finds where the v1 memory hierarchy (version 1) or the
// cgroup2 hierarchy (version 2) is mounted; "" when it is not.
func mountOf(version int) string {
	mounts, err := procfs.GetMounts()
	if err != nil {
		return ""
	}
	for _, m := range mounts {
		switch {
		case version == 2 && m.FSType == "cgroup2":
			if _, err := os.Stat(path.Join(m.MountPoint, "cgroup.controllers")); err == nil {
				if b, err := os.ReadFile(path.Join(m.MountPoint, "cgroup.controllers")); err == nil &&
					strings.Contains(" "+string(b)+" ", " memory") {
					return m.MountPoint
				}
			}
		case version == 1 && m.FSType == "cgroup":
			if _, ok := m.SuperOptions["memory"]; ok {
				return m.MountPoint
			}
		}
	}
	return ""
}
