package pystack

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// mapping is one line of /proc/PID/maps. This small reader is local to
// the package: only the fields the locator needs.
type mapping struct {
	start, end, offset uint64
	path               string
}

// mapFile is the path through which the mapping's file is opened: the
// file the process mapped, whatever its path says now.
func (m mapping) mapFile(pid int) string {
	return fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end)
}

// maxMapsLines bounds the parse of a hostile or huge address space.
const maxMapsLines = 1 << 16

func readMaps(pid int) ([]mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, fmt.Errorf("read maps of %d: %w", pid, err)
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	for n := 0; sc.Scan() && n < maxMapsLines; n++ {
		if m, ok := parseMapsLine(sc.Text()); ok {
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps of %d: %w", pid, err)
	}
	return out, nil
}

// parseMapsLine parses "start-end perms offset dev inode path"; lines
// without a path (anonymous memory) are skipped.
func parseMapsLine(line string) (mapping, bool) {
	f := strings.Fields(line)
	if len(f) < 6 || !strings.HasPrefix(f[5], "/") {
		return mapping{}, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return mapping{}, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	o, err3 := strconv.ParseUint(f[2], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return mapping{}, false
	}
	return mapping{start: s, end: e, offset: o, path: strings.Join(f[5:], " ")}, true
}
