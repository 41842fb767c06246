package jit

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Existing is told of a process that was running before the trace
// (coldtrace attach): its cache roots come from its own environment, and
// the libraries it has mapped already get their probes now, since their
// opens will never be seen.
func (e *Sensor) Existing(pid int32, exe string) {
	if e.col == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.col.proc(pid)
	if exe != "" {
		e.col.noteUse(pid, exe)
		e.useSeen(pid, exe)
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/maps")
	if err != nil {
		return // it exited; its exit is recorded elsewhere
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") || seen[f[5]] {
			continue
		}
		p := f[5]
		seen[p] = true
		e.col.noteUse(pid, p)
		e.useSeen(pid, p)
	}
	// Its libraries are probed through its own mappings, never by the
	// paths they list.
	e.scoper.Track(pid, false)
}
