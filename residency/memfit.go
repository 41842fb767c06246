package residency

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coldtrace/coldtrace/internal/mountinfo"
)

// Memory is the room the page cache has for a caller: the system's
// MemAvailable and the limit of the memory cgroup the caller runs in
// (its page-cache reads are charged there).
type Memory struct {
	AvailableBytes int64 `json:"available_bytes"`
	// Cgroup is the caller's memory cgroup directory when it (or an
	// ancestor) has a limit; LimitBytes is the effective limit and
	// AnonBytes the memory in it that reclaim cannot drop without swap.
	Cgroup     string `json:"cgroup,omitempty"`
	LimitBytes int64  `json:"limit_bytes,omitempty"`
	AnonBytes  int64  `json:"anon_bytes,omitempty"`
}

// unlimited is above any real limit; cgroup v1 writes "no limit" as
// about 2^63 rounded down to a page.
const unlimited = int64(1) << 62

// ReadMemory reads the room of the calling process.
func ReadMemory() (Memory, error) {
	var m Memory
	avail, err := memAvailable("/proc/meminfo")
	if err != nil {
		return m, err
	}
	m.AvailableBytes = avail
	dir, v2, err := memoryCgroupDir("/proc/self/cgroup", "/proc/self/mountinfo")
	if err != nil || dir == "" {
		return m, err
	}
	m.Cgroup = dir
	if v2 {
		m.LimitBytes, m.AnonBytes = cgroupV2Limit(dir)
	} else {
		m.LimitBytes, m.AnonBytes = cgroupV1Limit(dir)
	}
	if m.LimitBytes == 0 {
		m.Cgroup = ""
	}
	return m, nil
}

// FitError says why a prefetch would not stay in the page cache.
type FitError struct{ Reason string }

func (e *FitError) Error() string { return e.Reason }

// Check returns a *FitError when reading missing more bytes into the page
// cache would push out what was just read: more than MemAvailable, or
// more than the cgroup's limit minus its anonymous memory (reclaim in a
// cgroup at its limit drops the cgroup's own page cache first).
func (m Memory) Check(missing int64) error {
	if missing > m.AvailableBytes {
		return &FitError{fmt.Sprintf("%s to read but only %s available (MemAvailable): the first files read would be evicted before the run uses them",
			sizeText(missing), sizeText(m.AvailableBytes))}
	}
	if m.LimitBytes > 0 {
		room := max(m.LimitBytes-m.AnonBytes, 0)
		if missing > room {
			return &FitError{fmt.Sprintf("%s to read but the memory cgroup %s allows %s of page cache (limit %s, %s of it anonymous memory): prefetch would only evict what it had just read",
				sizeText(missing), m.Cgroup, sizeText(room), sizeText(m.LimitBytes), sizeText(m.AnonBytes))}
		}
	}
	return nil
}

func memAvailable(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read MemAvailable: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemAvailable %q: %w", rest, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemAvailable in %s", path)
}

// memoryCgroupDir finds the directory of the caller's memory cgroup: the
// v1 memory hierarchy when one is mounted, else the v2 unified one.
func memoryCgroupDir(cgroupFile, mountInfoFile string) (dir string, v2 bool, err error) {
	data, err := os.ReadFile(cgroupFile)
	if err != nil {
		return "", false, fmt.Errorf("read memory cgroup: %w", err)
	}
	var v1Path, v2Path string
	haveV2 := false
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2Path, haveV2 = f[2], true
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				v1Path = f[2]
			}
		}
	}
	mounts, err := os.ReadFile(mountInfoFile)
	if err != nil {
		return "", false, fmt.Errorf("read mounts: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(mounts))
	var v2Dir string
	for sc.Scan() {
		m, ok := mountinfo.Parse(sc.Text())
		if !ok {
			continue
		}
		root, mnt := m.Root, m.MountPoint
		switch m.FSType {
		case "cgroup":
			if v1Path != "" && hasOpt(m.SuperOptions, "memory") {
				if rel, ok := strings.CutPrefix(v1Path, root); ok {
					return filepath.Join(mnt, rel), false, nil
				}
			}
		case "cgroup2":
			if haveV2 {
				if rel, ok := strings.CutPrefix(v2Path, root); ok {
					v2Dir = filepath.Join(mnt, rel)
				}
			}
		}
	}
	if v2Dir != "" {
		return v2Dir, true, nil
	}
	return "", false, nil
}

func hasOpt(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// statValue reads one "key value" line of a memory.stat file.
func statValue(path, key string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func readInt(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil
}

// cgroupV1Limit is the hierarchical limit (the least of the cgroup's and
// its ancestors') and the anonymous memory charged below it.
func cgroupV1Limit(dir string) (limit, anon int64) {
	stat := filepath.Join(dir, "memory.stat")
	limit, ok := statValue(stat, "hierarchical_memory_limit")
	if !ok {
		limit, ok = readInt(filepath.Join(dir, "memory.limit_in_bytes"))
	}
	if !ok || limit >= unlimited {
		return 0, 0
	}
	anon, ok = statValue(stat, "total_rss")
	if !ok {
		anon, _ = statValue(stat, "rss")
	}
	return limit, anon
}

// cgroupV2Limit is the least memory.max of dir and its ancestors, and
// dir's anonymous memory.
func cgroupV2Limit(dir string) (limit, anon int64) {
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "memory.max"))
		if err != nil {
			break // the root has no memory.max; neither has a cgroup without the controller
		}
		if v := strings.TrimSpace(string(data)); v != "max" {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && (limit == 0 || n < limit) {
				limit = n
			}
		}
		if d == "/" || d == "." {
			break
		}
	}
	if limit == 0 {
		return 0, 0
	}
	anon, _ = statValue(filepath.Join(dir, "memory.stat"), "anon")
	return limit, anon
}

// sizeText writes n the way people read sizes: 1.5 GiB, 64.0 MiB, 512 B.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit && f > -unit || u == "TiB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return fmt.Sprintf("%d B", n)
}
