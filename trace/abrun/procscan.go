package abrun

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/coldtrace/coldtrace/attribution/abtest"
)

// pfKthread is PF_KTHREAD in /proc/PID/stat's flags field.
const pfKthread = 0x00200000

// proc is one process as /proc showed it at one scan.
type proc struct {
	ppid    int
	comm    string
	ticks   uint64 // utime + stime, in clock ticks
	ioBytes uint64 // read_bytes + write_bytes (block I/O caused)
	kthread bool
}

// scan reads every process under root (normally /proc).
func scan(root string) map[int]proc {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	out := make(map[int]proc, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readStat(filepath.Join(root, e.Name(), "stat"))
		if !ok {
			continue // gone since the directory was read
		}
		if !p.kthread {
			p.ioBytes = readIO(filepath.Join(root, e.Name(), "io"))
		}
		out[pid] = p
	}
	return out
}

// readStat parses /proc/PID/stat; the comm may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func readStat(path string) (proc, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return proc{}, false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return proc{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state): ppid is field 4, flags 9, utime 14, stime 15.
	if len(f) < 13 {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return proc{ppid: ppid, comm: string(b[open+1 : end]), ticks: ut + st, kthread: flags&pfKthread != 0}, true
}

// readIO sums read_bytes and write_bytes of /proc/PID/io (0 when it
// cannot be read).
func readIO(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var sum uint64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "read_bytes" || k == "write_bytes") {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			sum += n
		}
	}
	return sum
}

// treeOf is roots and every process descending from one of them in procs.
func treeOf(procs map[int]proc, roots map[int]bool) map[int]bool {
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	out := map[int]bool{}
	var walk func(int)
	walk = func(pid int) {
		if out[pid] {
			return
		}
		out[pid] = true
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for pid := range roots {
		walk(pid)
	}
	return out
}

// others is the interference between two scans: CPU ticks and I/O bytes
// of processes that are neither excluded nor kernel threads. A process
// new since the earlier scan counts in full: it started in between.
func others(prev, cur map[int]proc, exclude map[int]bool) (ticks, ioBytes uint64, per map[int]uint64) {
	per = map[int]uint64{}
	for pid, p := range cur {
		if exclude[pid] || p.kthread {
			continue
		}
		dt, dio := p.ticks, p.ioBytes
		if q, ok := prev[pid]; ok && q.comm == p.comm {
			dt, dio = sub(p.ticks, q.ticks), sub(p.ioBytes, q.ioBytes)
		}
		ticks += dt
		ioBytes += dio
		if dt > 0 {
			per[pid] += dt
		}
	}
	return ticks, ioBytes, per
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// topBusy lists the processes with the most ticks, busiest first.
func topBusy(per map[int]uint64, comms map[int]string, seconds, hz float64, n int) []abtest.Busy {
	var out []abtest.Busy
	for pid, t := range per {
		out = append(out, abtest.Busy{PID: pid, Comm: comms[pid], CPUs: float64(t) / hz / seconds})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CPUs != out[j].CPUs {
			return out[i].CPUs > out[j].CPUs
		}
		return out[i].PID < out[j].PID
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
