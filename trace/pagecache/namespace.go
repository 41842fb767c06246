package pagecache

import (
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nsPaths resolves paths in the mount namespace of the process that
// touched a file, when it is not coldtrace's own (a container, unshare
// -m, a process attached to): the path the process itself uses, and the
// host's path beside it. Mount tables are read once per namespace.
type nsPaths struct {
	self   string
	tables map[string]mountTable
	// read is when each namespace's table was read: a namespace's mounts
	// change after its first process was seen (unshare -m, then mount
	// --bind), so a path that resolves in none of them has the table
	// read again, at most every rereadAfter.
	read map[string]time.Time
	// readKT is when, on the probes' clock (CLOCK_MONOTONIC), each
	// table was read: a table read before a record was made can lack the
	// mount the record's path went through (read at the namespace's
	// first record, before its bind mount), and is read again for it
	// however recent.
	readKT map[string]uint64
	// pids are processes seen in each namespace (the latest last);
	// searched is when /proc was last searched for one.
	pids     map[string][]string
	searched map[string]time.Time
}

const rereadAfter = 20 * time.Millisecond

func mountNS(pid string) string {
	ns, err := os.Readlink("/proc/" + pid + "/ns/mnt")
	if err != nil {
		return ""
	}
	return ns
}

// maxNSPids is how many live processes of a namespace are remembered to
// read it through after the one that touched a file is gone.
const maxNSPids = 8

// resolve returns the path of fsPath on dev (inode ino) as process pid,
// of mount namespace nsInum (0: unknown, read from /proc), saw it at ts
// (CLOCK_MONOTONIC; 0: unknown), and
// false when pid shares coldtrace's namespace, or when no process of its
// namespace is left to read the namespace's mounts through.
func (n *nsPaths) resolve(pid int32, nsInum uint32, ts uint64, dev uint32, ino uint64, fsPath string) (string, bool) {
	if pid <= 0 {
		return "", false
	}
	if n.self == "" {
		n.self = mountNS("self")
		n.tables = map[string]mountTable{}
		n.pids = map[string][]string{}
	}
	p := strconv.Itoa(int(pid))
	ns := mountNS(p)
	if nsInum != 0 {
		want := "mnt:[" + strconv.FormatUint(uint64(nsInum), 10) + "]"
		if ns != want {
			ns, p = want, "" // gone, or its pid reused: through another
		}
	}
	if ns == "" || ns == n.self {
		return "", false
	}
	if p != "" && !slices.Contains(n.pids[ns], p) {
		n.pids[ns] = append(n.pids[ns], p)
		if len(n.pids[ns]) > maxNSPids {
			n.pids[ns] = n.pids[ns][1:]
		}
	}
	// A process of the namespace, alive, to read its mounts through.
	if p == "" {
		for _, q := range slices.Backward(n.pids[ns]) {
			if mountNS(q) == ns {
				p = q
				break
			}
		}
		if p == "" {
			if p = n.findIn(ns); p == "" {
				return "", false
			}
		}
	}
	mt, ok := n.tables[ns]
	if !ok {
		mt = n.readTable(ns, p)
	}
	if mt != nil {
		if got, ok := mt.resolveIn(p, dev, ino, fsPath); ok {
			return got, true
		}
	}
	if time.Since(n.read[ns]) < rereadAfter && (ts == 0 || n.readKT[ns] >= ts) {
		return "", false
	}
	if mt = n.readTable(ns, p); mt == nil {
		return "", false
	}
	return mt.resolveIn(p, dev, ino, fsPath)
}

// readTable reads the mount table of namespace ns through process p.
func (n *nsPaths) readTable(ns, p string) mountTable {
	if n.read == nil {
		n.read = map[string]time.Time{}
		n.readKT = map[string]uint64{}
	}
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) // cannot fail on Linux
	mt, err := readMountTable("/proc/" + p + "/mountinfo")
	if err != nil {
		mt = nil
	}
	n.tables[ns], n.read[ns], n.readKT[ns] = mt, time.Now(), uint64(now.Nano())
	return mt
}

// resolveIn picks, among the mounts of the namespace of process pid that
// show fsPath of dev, the path that names the same file inside it (a
// mount can hide another), preferring the deepest mount point: a bind
// mount or a container volume is how the process reaches the file, the
// file system's own root mount only how the host does.
func (mt mountTable) resolveIn(pid string, dev uint32, ino uint64, fsPath string) (string, bool) {
	type cand struct {
		p     string
		depth int
	}
	cands := make([]cand, 0, len(mt[dev]))
	for _, m := range mt[dev] {
		root := strings.TrimSuffix(m.root, "/")
		if !strings.HasPrefix(fsPath+"/", root+"/") {
			continue
		}
		cands = append(cands, cand{path.Join(m.mountPoint, strings.TrimPrefix(fsPath, root)), depth(m.mountPoint)})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].depth > cands[j].depth })
	for _, c := range cands {
		var st syscall.Stat_t
		if err := syscall.Stat("/proc/"+pid+"/root"+c.p, &st); err == nil && st.Ino == ino {
			return c.p, true
		}
	}
	return "", false
}

func depth(p string) int {
	if p = path.Clean(p); p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// findIn looks through /proc for a live process of namespace ns (the
// reader's parent, a container's init), at most once per rereadAfter per
// namespace; "" when there is none.
func (n *nsPaths) findIn(ns string) string {
	if n.searched == nil {
		n.searched = map[string]time.Time{}
	}
	if time.Since(n.searched[ns]) < rereadAfter {
		return ""
	}
	n.searched[ns] = time.Now()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if name := e.Name(); name[0] >= '1' && name[0] <= '9' && mountNS(name) == ns {
			n.pids[ns] = append(n.pids[ns], name)
			return name
		}
	}
	return ""
}
