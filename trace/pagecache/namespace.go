package pagecache

import (
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
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
}

const rereadAfter = 20 * time.Millisecond

func mountNS(pid string) string {
	ns, err := os.Readlink("/proc/" + pid + "/ns/mnt")
	if err != nil {
		return ""
	}
	return ns
}

// resolve returns the path of fsPath on dev (inode ino) as process pid sees it, and
// false when pid shares coldtrace's namespace or is gone.
func (n *nsPaths) resolve(pid int32, dev uint32, ino uint64, fsPath string) (string, bool) {
	if pid <= 0 {
		return "", false
	}
	if n.self == "" {
		n.self = mountNS("self")
		n.tables = map[string]mountTable{}
	}
	p := strconv.Itoa(int(pid))
	ns := mountNS(p)
	if ns == "" || ns == n.self {
		return "", false
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
	if time.Since(n.read[ns]) < rereadAfter {
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
	}
	mt, err := readMountTable("/proc/" + p + "/mountinfo")
	if err != nil {
		mt = nil
	}
	n.tables[ns], n.read[ns] = mt, time.Now()
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
