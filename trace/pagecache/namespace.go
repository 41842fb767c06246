package pagecache

import (
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	// held keeps each namespace readable after its last process exits
	// (a reader alone in it that exits milliseconds after its reads):
	// its mountinfo, opened while a process of it lived, holds the
	// namespace and shows its mounts as they are now when read again,
	// and its root resolves paths through those mounts.
	held map[string]heldNS
}

// maxHeld bounds the namespaces held: each keeps its mounts (and their
// file systems) alive until the run ends.
const maxHeld = 64

type heldNS struct {
	mountinfo, root *os.File
}

// hold opens namespace ns's mountinfo and root through its process p,
// once.
func (n *nsPaths) hold(ns, p string) {
	if _, ok := n.held[ns]; ok || p == "" || len(n.held) >= maxHeld {
		return
	}
	if n.held == nil {
		n.held = map[string]heldNS{}
	}
	// Blocking, so that Go's poller does not take it: its epoll asks the
	// file whether the mounts changed, and the kernel tells only the
	// first to ask (mountsChanged).
	fd, err := unix.Open("/proc/"+p+"/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	mi := os.NewFile(uintptr(fd), "/proc/"+p+"/mountinfo")
	root, err := os.OpenFile("/proc/"+p+"/root", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil || mountNS(p) != ns { // gone, or its pid reused
		mi.Close()
		if root != nil {
			root.Close()
		}
		return
	}
	n.held[ns] = heldNS{mountinfo: mi, root: root}
}

// holdVia holds namespace ns through process p (none: a live process of
// ns) and returns the process to read ns through, "" when none is left.
// p was alive when its namespace was looked up, but may be gone by now: a
// reader that exits while its first path is resolved, which a loaded
// machine makes likely (its file went by the host's name, the reader's
// parent alive in the namespace all along); ns is then held through
// another of its processes.
func (n *nsPaths) holdVia(ns, p string) string {
	if p == "" {
		p = n.liveIn(ns)
	}
	n.hold(ns, p)
	if _, ok := n.held[ns]; ok || p == "" || mountNS(p) == ns {
		return p // held, or alive (only not held: maxHeld)
	}
	delete(n.searched, ns) // gone: /proc may be searched again at once
	if q := n.liveIn(ns); q != "" {
		n.hold(ns, q)
		return q
	}
	return ""
}

// liveIn is a live process of namespace ns: the latest one seen in it
// that still is, else one found in /proc; "" when there is none.
func (n *nsPaths) liveIn(ns string) string {
	for _, q := range slices.Backward(n.pids[ns]) {
		if mountNS(q) == ns {
			return q
		}
	}
	return n.findIn(ns)
}

// close releases the namespaces held.
func (n *nsPaths) close() {
	for ns, h := range n.held {
		h.mountinfo.Close()
		h.root.Close()
		delete(n.held, ns)
	}
}

const rereadAfter = 20 * time.Millisecond

// nsName is how /proc names mount namespace inum (its ns/mnt link).
func nsName(inum uint32) string {
	return "mnt:[" + strconv.FormatUint(uint64(inum), 10) + "]"
}

func mountNS(pid string) string {
	ns, err := os.Readlink("/proc/" + pid + "/ns/mnt")
	if err != nil {
		return ""
	}
	return ns
}

// pidNamespaces remembers, for one pass over the files (Sensor.fill),
// each process's mount namespace ("" for a process gone): the files of a
// run were mostly touched last by a few processes, and a readlink of
// /proc per file was all a checkpoint did for a file of coldtrace's own
// namespace (2,000 of them at the end of a cold import of 2,000 modules,
// its reader gone).
type pidNamespaces map[int32]string

// foreignNS is process pid's mount namespace when it is another than
// coldtrace's, "" otherwise (coldtrace's own, or the process gone): only
// then can resolveIn name a file as the process saw it. Each process's
// is read once per pass (seen).
func (n *nsPaths) foreignNS(pid int32, seen pidNamespaces) string {
	if pid <= 0 {
		return ""
	}
	ns, ok := seen[pid]
	if !ok {
		ns = mountNS(strconv.Itoa(int(pid)))
		seen[pid] = ns
	}
	if ns == n.selfNS() {
		return ""
	}
	return ns
}

// selfNS is coldtrace's own mount namespace, read once.
func (n *nsPaths) selfNS() string {
	if n.self == "" {
		n.self = mountNS("self")
		n.tables = map[string]mountTable{}
		n.pids = map[string][]string{}
	}
	return n.self
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
	n.selfNS()
	// Most records are of processes in coldtrace's own namespace, which
	// the kernel names in the record: no link of /proc is read for them
	// (a readlink was most of a record's handling in a cold import).
	if nsInum != 0 && n.self == nsName(nsInum) {
		return "", false
	}
	p := strconv.Itoa(int(pid))
	ns := mountNS(p)
	if nsInum != 0 {
		want := nsName(nsInum)
		if ns != want {
			ns, p = want, "" // gone, or its pid reused: through another
		}
	}
	if ns == "" || ns == n.self {
		return "", false
	}
	return n.resolveIn(ns, p, ts, dev, ino, fsPath)
}

// resolveIn is resolve in namespace ns, another than coldtrace's, as
// process p of it saw the file ("": a process gone, read through
// another of ns).
func (n *nsPaths) resolveIn(ns, p string, ts uint64, dev uint32, ino uint64, fsPath string) (string, bool) {
	if p != "" && !slices.Contains(n.pids[ns], p) {
		n.pids[ns] = append(n.pids[ns], p)
		if len(n.pids[ns]) > maxNSPids {
			n.pids[ns] = n.pids[ns][1:]
		}
	}
	p = n.holdVia(ns, p)
	stat := n.statIn(ns, p)
	if stat == nil {
		return "", false
	}
	if h, ok := n.held[ns]; ok && mountsChanged(h.mountinfo) {
		// A table read before a mount (the namespace's first record
		// came before its bind mount) still resolves the path, through
		// the mount the host sees it by, so no failure would have it
		// read again.
		delete(n.tables, ns)
	}
	mt, ok := n.tables[ns]
	if !ok {
		mt = n.readTable(ns, p)
	}
	if mt != nil {
		if got, ok := mt.resolveIn(stat, dev, ino, fsPath); ok {
			return got, true
		}
	}
	if time.Since(n.read[ns]) < rereadAfter && (ts == 0 || n.readKT[ns] >= ts) {
		return "", false
	}
	if mt = n.readTable(ns, p); mt == nil {
		return "", false
	}
	return mt.resolveIn(stat, dev, ino, fsPath)
}

// mountsChanged says whether the mounts of the namespace whose
// mountinfo f is have changed since f was opened or last asked: the
// kernel flags an open mountinfo on every mount and unmount (poll's
// POLLPRI and POLLERR), whoever reads it.
func mountsChanged(f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
}

// statIn stats a path as namespace ns sees it: through its held root,
// else through live process p's; nil when neither is left.
func (n *nsPaths) statIn(ns, p string) func(string, *unix.Stat_t) error {
	if h, ok := n.held[ns]; ok {
		return func(path string, st *unix.Stat_t) error {
			return unix.Fstatat(int(h.root.Fd()), "./"+strings.TrimPrefix(path, "/"), st, 0)
		}
	}
	if p == "" {
		return nil
	}
	return func(path string, st *unix.Stat_t) error {
		return unix.Stat("/proc/"+p+"/root"+path, st)
	}
}

// readTable reads the mount table of namespace ns through process p.
func (n *nsPaths) readTable(ns, p string) mountTable {
	if n.read == nil {
		n.read = map[string]time.Time{}
		n.readKT = map[string]uint64{}
	}
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) // cannot fail on Linux
	var mt mountTable
	var err error
	if h, ok := n.held[ns]; ok {
		mt, err = parseMountTable(io.NewSectionReader(h.mountinfo, 0, 1<<40))
	} else {
		mt, err = readMountTable("/proc/" + p + "/mountinfo")
	}
	if err != nil {
		mt = nil
	}
	n.tables[ns], n.read[ns], n.readKT[ns] = mt, time.Now(), uint64(now.Nano())
	return mt
}

// resolveIn picks, among the mounts of a namespace (stat sees its paths) that
// show fsPath of dev, the path that names the same file inside it (a
// mount can hide another), preferring the deepest mount point: a bind
// mount or a container volume is how the process reaches the file, the
// file system's own root mount only how the host does.
func (mt mountTable) resolveIn(stat func(string, *unix.Stat_t) error, dev uint32, ino uint64, fsPath string) (string, bool) {
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
		var st unix.Stat_t
		if err := stat(c.p, &st); err == nil && st.Ino == ino {
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
