package jit

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/trace/probe"
)

// Python's bytecode cache while no path syscall is traced. Tracing the
// path syscalls puts every syscall of every task on the machine on the
// kernel's slow path (about 0.1 µs each): a tenth of a Python program
// that reads many small files, for a cache that is rarely what makes a
// start slow. The page-cache probes send instead the first read of each
// .py and .pyc file by a process, and each new file, and these stand in
// for the path events:
//   - a .pyc read is a lookup that found its entry (a hit);
//   - a .py read is a lookup whose .pyc was absent or stale: CPython reads
//     the source only to compile it (a failed lookup of the .pyc the
//     source maps to, cache_from_source);
//   - a new file with a temp name (x.cpython-311.pyc.140234) is the entry
//     being written; the rename into place that follows is not seen, and
//     is taken to follow at once (_write_atomic).
// What it cannot see: a failed lookup whose source is never read (a
// source that is gone), and a source read for another reason (a
// traceback's lines, inspect.getsource) counts as a miss; the main
// script, which has no .pyc, is left out.

// pycacheTag is CPython's cache tag (sys.implementation.cache_tag) from
// the interpreter's file name: python3.11 → cpython-311.
var pythonExe = regexp.MustCompile(`^python(\d)\.(\d+)`)

func pycacheTag(exe string) string {
	m := pythonExe.FindStringSubmatch(path.Base(exe))
	if m == nil {
		return ""
	}
	return "cpython-" + m[1] + m[2]
}

// tagOfPyc is the cache tag in a .pyc's name (mod.cpython-311.pyc,
// mod.cpython-311.opt-1.pyc), or "".
func tagOfPyc(name string) string {
	name = strings.TrimSuffix(path.Base(name), ".pyc")
	parts := strings.Split(name, ".")
	for i := len(parts) - 1; i > 0; i-- {
		if strings.HasPrefix(parts[i], "cpython-") {
			return parts[i]
		}
	}
	return ""
}

// cacheFromSource is the .pyc CPython looks up for the source src
// (importlib.util.cache_from_source, no optimization level): beside it in
// __pycache__, or under prefix (PYTHONPYCACHEPREFIX) at the source's
// directory.
func cacheFromSource(src, tag, prefix string) string {
	if tag == "" || !strings.HasSuffix(src, ".py") || !strings.HasPrefix(src, "/") {
		return ""
	}
	dir, file := path.Split(src)
	name := strings.TrimSuffix(file, ".py") + "." + tag + ".pyc"
	if prefix != "" {
		if !strings.HasPrefix(prefix, "/") {
			return ""
		}
		return path.Join(prefix, dir, name)
	}
	return path.Join(dir, "__pycache__", name)
}

// entryOfTemp is the .pyc a temp name of CPython's _write_atomic
// (PATH.pyc.ID) is renamed to, and whether it is one.
func entryOfTemp(p string) (string, bool) {
	i := strings.LastIndex(p, ".pyc.")
	if i < 0 {
		return "", false
	}
	if _, err := strconv.ParseUint(p[i+5:], 10, 64); err != nil {
		return "", false
	}
	return p[:i+4], true
}

// pythonArgs reads a python command line: the script file it runs (""
// for -c, -m, stdin, or not a Python command line) and whether -B turns
// bytecode writing off. Options that take a value (-W, -X,
// --check-hash-based-pycs) skip it.
func pythonArgs(argv []string) (script string, noWrite bool) {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-" || a == "--":
			if a == "--" && i+1 < len(argv) {
				return argv[i+1], noWrite
			}
			return "", noWrite
		case a == "-W" || a == "-X" || a == "--check-hash-based-pycs":
			i++
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-"):
			// Flags may be combined (-uBc): the first that takes a value
			// ends them.
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'B':
					noWrite = true
				case 'c', 'm':
					return "", noWrite
				case 'W', 'X':
					if j == len(a)-1 {
						i++
					}
					j = len(a)
				}
			}
		default:
			return a, noWrite
		}
	}
	return "", noWrite
}

// pyProc is what the evidence of one Python process needs from /proc.
type pyProc struct {
	tag     string // cache tag, "" unknown
	script  string // the main script, absolute; "" none or unknown
	noWrite bool   // -B: bytecode is never written
}

// pythonProc reads pid's interpreter and main script from /proc (once:
// a process that is gone keeps what was read, or the run's last tag).
func (e *Sensor) pythonProc(pid int32) *pyProc {
	if pp := e.pyProcs[pid]; pp != nil {
		return pp
	}
	pp := &pyProc{}
	dir := "/proc/" + strconv.Itoa(int(pid))
	if exe, err := os.Readlink(dir + "/exe"); err == nil {
		pp.tag = pycacheTag(exe)
	}
	if b, err := os.ReadFile(dir + "/cmdline"); err == nil {
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		s, noWrite := pythonArgs(argv)
		pp.noWrite = noWrite
		if s != "" {
			if !strings.HasPrefix(s, "/") {
				if cwd, err := os.Readlink(dir + "/cwd"); err == nil {
					s = path.Join(cwd, s)
				} else {
					s = ""
				}
			}
			pp.script = path.Clean(s)
		}
	}
	if e.pyProcs == nil {
		e.pyProcs = map[int32]*pyProc{}
	}
	e.pyProcs[pid] = pp
	return pp
}

// pythonFile keeps a page-cache record of a Python file for the collector,
// unless the path syscalls were traced by then (they saw the real
// events). The records are handed over at the end of the run: the
// process's exec into Python (its environment: PYTHONPYCACHEPREFIX) may
// reach the collector after them. Called with e.mu held.
func (e *Sensor) pythonFile(f probe.FileSeen) {
	if e.path.covers(f.TS) {
		return
	}
	if len(e.pyPending) >= maxPythonRecords {
		e.pyDropped++
		return
	}
	if f.Kind == probe.SeenPythonRead && strings.HasSuffix(f.Path, ".pyc") {
		if t := tagOfPyc(f.Path); t != "" {
			e.lastTag = t
		}
	}
	var pp *pyProc
	if f.Kind == probe.SeenPythonRead && strings.HasSuffix(f.Path, ".py") {
		pp = e.pythonProc(f.PID)
	}
	e.pyPending = append(e.pyPending, pendingPython{f, pp})
	if e.pyPendingPIDs == nil {
		e.pyPendingPIDs = map[int32]bool{}
	}
	e.pyPendingPIDs[f.PID] = true
}

// maxPythonRecords bounds the Python records kept for the end of a run
// (one per file and process: some 2,000 for a program importing torch).
const maxPythonRecords = 1 << 20

// pendingPython is a page-cache record of a Python file waiting for the
// end of the run, with its process's interpreter and script for a source.
type pendingPython struct {
	f  probe.FileSeen
	pp *pyProc
}

// flushPython hands the collector the Python records kept. A process
// gone before its /proc was read gets the cache tag of the program it
// executed, else the latest tag of a .pyc read. Called with e.mu held.
func (e *Sensor) flushPython() {
	for _, p := range e.pyPending {
		if p.pp != nil && p.pp.tag == "" {
			if p.pp.tag = e.col.exeTag(p.f.PID); p.pp.tag == "" {
				p.pp.tag = e.lastTag
			}
		}
		e.col.PythonFile(p.f, p.pp)
	}
	e.pyPending, e.pyPendingPIDs = nil, nil
	if e.pyDropped > 0 {
		e.warnings = append(e.warnings, fmt.Sprintf("jit: %d page-cache records of Python files not kept (more than %d)", e.pyDropped, maxPythonRecords))
	}
}

// exeTag is the cache tag of the program pid executed last, from its file
// name with links followed ("" when not Python or unknown).
func (c *Collector) exeTag(pid int32) string {
	p := c.procs[pid]
	if p == nil || p.exe == "" {
		return ""
	}
	exe := p.exe
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return pycacheTag(exe)
}

// PythonFile records the path events a page-cache record of a Python
// file stands for (see python.go); pp is the process's interpreter and
// script, for a source read. A source read is a failed lookup at once
// when the process writes no bytecode (PYTHONDONTWRITEBYTECODE, -B);
// otherwise only once its .pyc is written after it: a source read with
// nothing written is data (a program reading .py files), not an import.
func (c *Collector) PythonFile(f probe.FileSeen, pp *pyProc) {
	c.Seen++
	ev := FileEvent{TS: f.TS, PID: f.PID, TID: f.TID, CPUNS: f.CPUNS, Op: OpOpen, Path: f.Path}
	switch {
	case f.Kind == probe.SeenCreated:
		entry, ok := entryOfTemp(f.Path)
		if !ok {
			c.createdFile(ev, probe.FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen})
			return
		}
		if src, ok := c.pySources[f.PID][entry]; ok {
			delete(c.pySources[f.PID], entry)
			c.observe(src)
		}
		ev.Flags = unix.O_WRONLY | oCreat | oExcl
		c.observe(ev)
		ev.Op, ev.Flags, ev.NewPath = OpRename, 0, entry
		ev.TS++ // after the creation, however the sort orders equal times
		c.observe(ev)
	case f.Kind != probe.SeenPythonRead:
	case strings.HasSuffix(f.Path, ".pyc"):
		c.observe(ev)
	case pp != nil && f.Path != pp.script:
		p := c.proc(f.PID)
		pyc := cacheFromSource(f.Path, pp.tag, p.env["PYTHONPYCACHEPREFIX"])
		if pyc == "" {
			return
		}
		ev.Path, ev.Errno = pyc, errENOENT
		if pp.noWrite || p.env["PYTHONDONTWRITEBYTECODE"] != "" {
			c.observe(ev)
			return
		}
		if c.pySources == nil {
			c.pySources = map[int32]map[string]FileEvent{}
		}
		if c.pySources[f.PID] == nil {
			c.pySources[f.PID] = map[string]FileEvent{}
		}
		c.pySources[f.PID][pyc] = ev
	}
}

// createdFile records a new file under a cache root that the path
// syscalls did not see: its creation (a temp name is a fill begun, an
// entry a fill in place), and, for a temp name, its rename into place
// when the file's inode now has another name in the same directory (how
// a Hugging Face blob's .incomplete becomes the blob). The rename is put
// right after the creation: its time is not known.
func (c *Collector) createdFile(ev FileEvent, key probe.FileKey) {
	r, rel := c.roots.match(ev.Path)
	if r == nil {
		return
	}
	ev.Flags = unix.O_WRONLY | oCreat
	c.observe(ev)
	if classify(r.root.Spec, rel).kind != kindTemp {
		return
	}
	if final := renamedTo(ev.Path, key); final != "" {
		ev.Op, ev.Flags, ev.NewPath = OpRename, 0, final
		ev.TS++
		c.observe(ev)
	}
}

// renamedTo is the name the file key has now in the directory of p, when
// it is another one ("" when gone, or the directory is too large to
// search). A name with key's inode number and another generation is a
// later file given the number after key's was deleted.
func renamedTo(p string, key probe.FileKey) string {
	dir := path.Dir(p)
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) > 10000 {
		return ""
	}
	for _, e := range ents {
		q := path.Join(dir, e.Name())
		if q == p {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(q, &st) == nil && st.Ino == key.Ino && unix.Major(st.Dev)<<20|unix.Minor(st.Dev) == key.Dev &&
			sameGeneration(q, key.Gen) {
			return q
		}
	}
	return ""
}

// observe keeps an event under a cache root (the caller counts what it
// was handed in Seen).
func (c *Collector) observe(ev FileEvent) {
	if c.keep(&ev) {
		if len(c.events) >= c.cfg.MaxEvents {
			c.dropped++
		} else {
			c.events = append(c.events, ev)
		}
	}
}

// sameGeneration reports whether the file at q has inode generation gen,
// or cannot say otherwise (a filesystem that does not give it: tmpfs).
func sameGeneration(q string, gen uint32) bool {
	fd, err := unix.Open(q, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	g, err := probe.InodeGeneration(fd)
	return err != nil || g == gen
}
