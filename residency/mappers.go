package residency

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapper is a process that has a file mapped: its pages cannot be dropped
// while it does.
type Mapper struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

// mappers returns the processes whose /proc/PID/maps map (dev, ino),
// among those the calling thread may inspect (the kernel checks the
// caller's filesystem credentials, so under an Actor: the user's own
// processes). It must run inside the Actor.
func mappers(dev, ino uint64) []Mapper {
	want := []byte(" " + strconv.FormatUint(ino, 10) + " ")
	devField := []byte(" " + hex2(unix.Major(dev)) + ":" + hex2(unix.Minor(dev)) + " ")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Mapper
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if mapsHas(filepath.Join("/proc", e.Name(), "maps"), devField, want) {
			comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			out = append(out, Mapper{PID: pid, Comm: strings.TrimSpace(string(comm))})
		}
	}
	return out
}

// mapsHas reports whether a maps file has a line with the device and
// inode fields given (each with its surrounding spaces).
func mapsHas(path string, dev, ino []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false // gone, or not ours to see
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		// address perms offset dev inode path
		line := sc.Bytes()
		if i := bytes.Index(line, dev); i >= 0 && bytes.HasPrefix(line[i+len(dev)-1:], ino) {
			return true
		}
	}
	return false
}

// hex2 formats a device number part the way /proc/PID/maps does (%02x).
func hex2(n uint32) string {
	s := strconv.FormatUint(uint64(n), 16)
	if len(s) < 2 {
		s = "0" + s
	}
	return s
}
