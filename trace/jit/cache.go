package jit

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

// Op is a file operation seen by the probes.
type Op uint8

const (
	OpOpen   Op = iota + 1
	OpLookup    // stat/access family; the probes report only failures
	OpMkdir
	OpRename
	OpUnlink
	OpChdir
)

// Open flags and errnos, as the kernel passes them (x86-64).
const (
	oAccMode   = unix.O_ACCMODE
	oCreat     = unix.O_CREAT
	oExcl      = unix.O_EXCL
	oTrunc     = unix.O_TRUNC
	oDirectory = unix.O_DIRECTORY
	oTmpfile   = unix.O_TMPFILE // __O_TMPFILE|O_DIRECTORY, as open(2) requires
	errENOENT  = int(unix.ENOENT)
	errEEXIST  = int(unix.EEXIST)
)

// FileEvent is one path operation of a traced thread, with its paths
// already made absolute.
type FileEvent struct {
	TS       uint64 // CLOCK_MONOTONIC ns
	PID, TID int32
	Op       Op
	Path     string // the file (rename: the old name)
	NewPath  string // rename: the new name
	Flags    uint32 // open flags
	Errno    int    // 0 on success
	CPUNS    uint64 // the thread's on-CPU time so far
	Stack    uint64 // the thread's Python stack id (bpf/include/pywalk.h), 0: none
}

type kind uint8

const (
	kindNone    kind = iota // above entry level, or not an entry file
	kindEntry               // an entry, or a file inside one
	kindTemp                // a file or directory being written
	kindIgnored             // bookkeeping
)

type classified struct {
	kind kind
	key  string // entry key: its path below the root
	self bool   // the path is the entry directory itself (EntryDepth > 0)
}

// classify places a path, given relative to the root, in s's layout.
func classify(s *registry.Spec, rel string) classified {
	n := 1
	for rest := rel; ; {
		c, more, found := strings.Cut(rest, "/")
		if matchAny(s.Ignore, c) {
			return classified{kind: kindIgnored}
		}
		if matchAny(s.Temp, c) {
			return classified{kind: kindTemp}
		}
		if !found {
			break
		}
		rest = more
		n++
	}
	if s.EntryDepth > 0 {
		if n < s.EntryDepth {
			return classified{}
		}
		key := rel
		if n > s.EntryDepth {
			i := -1
			for k := 0; k < s.EntryDepth; k++ {
				i += 1 + strings.IndexByte(rel[i+1:], '/')
			}
			key = rel[:i]
		}
		return classified{kind: kindEntry, key: key, self: n == s.EntryDepth}
	}
	if len(s.Entries) > 0 && !matchAny(s.Entries, path.Base(rel)) {
		return classified{}
	}
	return classified{kind: kindEntry, key: rel}
}

// entryOf places p, rel below r's root, in r's layout. An in-tree root
// ("**/__pycache__") is one root for every directory of that name, and
// each holds its own modules' entries: their key is the whole path
// (without its leading slash), or two packages' __init__ would be one
// entry, and one package's read followed by another's write a stale
// entry compiled over the time between.
func entryOf(r *rootState, p, rel string) classified {
	c := classify(r.root.Spec, rel)
	if c.kind == kindEntry && r.root.Anywhere != "" && strings.HasSuffix(p, rel) {
		c.key = strings.TrimPrefix(p[:len(p)-len(rel)], "/") + c.key
	}
	return c
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if globMatch(g, name) {
			return true
		}
	}
	return false
}

// globMatch is path.Match for one path component, with fast paths for
// the registry's forms ("abc", "abc*", "*abc", "a*b", "*abc*").
func globMatch(g, s string) bool {
	if !strings.ContainsAny(g, "?[\\") {
		switch strings.Count(g, "*") {
		case 0:
			return g == s
		case 1:
			i := strings.IndexByte(g, '*')
			return len(s) >= len(g)-1 && strings.HasPrefix(s, g[:i]) && strings.HasSuffix(s, g[i+1:])
		case 2:
			if g[0] == '*' && g[len(g)-1] == '*' {
				return strings.Contains(s, g[1:len(g)-1])
			}
		}
	}
	ok, _ := path.Match(g, s)
	return ok
}

// stamp is a moment in one thread.
type stamp struct {
	ts       uint64
	pid, tid int32
	cpu      uint64
	stack    uint64 // the thread's Python stack id, 0: none
}

type mark struct {
	stamp
	created bool // the process created the entry (mkdir): a miss for sure
}

// episode is one miss: from the first failed lookup (or the creation of
// the entry, or of the temp file that became it) to the entry's fill.
type episode struct {
	root     *rootState
	key      string
	start    stamp
	end      stamp
	filled   bool
	lost     bool   // ended by a rename into the entry that failed: compiled, not kept
	inproc   uint64 // on-CPU time of the starting thread, nested episodes excluded
	compSpan []span // compiler subtrees assigned to it
}

type entry struct {
	marks map[int32]*mark // open failed lookups and creations, by pid
	hitBy map[int32]stamp // processes that opened it for reading
	own   map[int32]bool  // processes that missed it or filled it this run
	open  *episode        // a miss not yet filled
	last  *episode        // the last filled episode
}

type pidKey struct {
	pid int32
	key string
}

// rootState is the evidence gathered for one root.
type rootState struct {
	root       registry.Root
	lookups    uint64
	hits       uint64
	misses     uint64
	written    uint64
	stale      uint64 // entries read and then written again: their key no longer matched
	keys       entryKeys
	looked     map[pidKey]bool
	entries    map[string]*entry
	fills      map[string]bool // paths written as (parts of) entries
	episodes   []*episode
	switches   []registry.Switch
	switchPIDs map[string]map[int32]bool // switch → processes whose environment had it
	limit      int64
	activePIDs map[int32]bool // built by activeBy once the events are in
	// downloaded: a process that places this weights cache downloaded
	// something (see DownloadSeen).
	downloaded bool
	// failures are the calls under the root that failed in a way no
	// lookup does: what was compiled was not kept (see failure).
	failures map[failKey]*failAgg
	// stackHits and stackMisses count hits and misses by the Python
	// stack of the lookup that made them (0: none).
	stackHits, stackMisses map[uint64]uint64
}

type failKey struct {
	op    string
	errno int
}

// failAgg is one kind of failed call under a root.
type failAgg struct {
	count uint64
	first stamp
	path  string
	pids  map[int32]bool
}

func newRootState(r registry.Root) *rootState {
	return &rootState{root: r, looked: map[pidKey]bool{}, entries: map[string]*entry{}, fills: map[string]bool{}}
}

func (r *rootState) active() bool {
	return r.lookups+r.hits+r.misses+r.written > 0 || len(r.failures) > 0
}

// activeBy reports whether pid looked anything up in the cache.
func (r *rootState) activeBy(pid int32) bool {
	if r.activePIDs == nil {
		r.activePIDs = map[int32]bool{}
		for k := range r.looked {
			r.activePIDs[k.pid] = true
		}
	}
	return r.activePIDs[pid]
}

func (r *rootState) entry(key string) *entry {
	e := r.entries[key]
	if e == nil {
		e = &entry{marks: map[int32]*mark{}, hitBy: map[int32]stamp{}, own: map[int32]bool{}}
		r.entries[key] = e
	}
	return e
}

func (r *rootState) look(pid int32, key string) {
	k := pidKey{pid, key}
	if !r.looked[k] {
		r.looked[k] = true
		r.lookups++
	}
}

// cacheState runs the classification over the events kept during the run.
type cacheState struct {
	roots  *rootSet
	births map[string]stamp // temp paths and when they were created
	// exists, when set, says whether a path exists at the end of the
	// run: a file written in place that is gone was scratch, not an
	// entry.
	exists func(string) bool
}

func (cs *cacheState) apply(ev *FileEvent) {
	st := stamp{ev.TS, ev.PID, ev.TID, ev.CPUNS, ev.Stack}
	switch ev.Op {
	case OpOpen:
		if ev.Flags&oTmpfile == oTmpfile {
			return // an unnamed temp file is never an entry
		}
		r, rel := cs.roots.match(ev.Path)
		if r == nil {
			return
		}
		c := entryOf(r, ev.Path, rel)
		write := ev.Flags&oAccMode != 0
		if openBroke(ev, write) && c.kind != kindIgnored {
			r.failure("open", ev.Errno, ev.Path, st)
		}
		switch c.kind {
		case kindTemp:
			if ev.Errno == 0 && ev.Flags&oCreat != 0 {
				cs.births[ev.Path] = st
			}
			return
		case kindEntry:
		default:
			return
		}
		switch {
		case ev.Errno == errENOENT:
			cs.failed(r, c.key, st, false)
		case ev.Errno != 0:
		case write && ev.Flags&(oCreat|oTrunc) != 0:
			if cs.exists != nil && !cs.exists(ev.Path) {
				return // scratch, removed before the end
			}
			cs.fill(r, c.key, ev.Path, st, nil)
		case write:
		case ev.Flags&oDirectory != 0 || c.self:
			r.look(ev.PID, c.key)
		default:
			cs.read(r, c.key, st)
		}
	case OpLookup:
		if ev.Errno != errENOENT {
			return
		}
		r, rel := cs.roots.match(ev.Path)
		if r == nil {
			return
		}
		if c := entryOf(r, ev.Path, rel); c.kind == kindEntry {
			cs.failed(r, c.key, st, false)
		}
	case OpMkdir:
		r, rel := cs.roots.match(ev.Path)
		if r == nil {
			return
		}
		c := entryOf(r, ev.Path, rel)
		switch {
		case c.kind == kindTemp && ev.Errno == 0:
			cs.births[ev.Path] = st
		case c.kind == kindEntry && c.self && ev.Errno == 0:
			cs.failed(r, c.key, st, true)
		case c.kind == kindEntry && c.self && ev.Errno == errEEXIST:
			r.look(ev.PID, c.key)
		}
	case OpUnlink:
		if r, rel := cs.roots.match(ev.Path); r != nil && ev.Errno != 0 && classify(r.root.Spec, rel).kind != kindIgnored {
			r.failure("unlink", ev.Errno, ev.Path, st)
		}
	case OpRename:
		if ev.Errno != 0 {
			cs.failedRename(ev, st)
			return
		}
		birth, hadBirth := cs.births[ev.Path]
		delete(cs.births, ev.Path)
		r, rel := cs.roots.match(ev.NewPath)
		if r == nil {
			return
		}
		c := entryOf(r, ev.NewPath, rel)
		switch c.kind {
		case kindTemp:
			if !hadBirth {
				birth = st
			}
			cs.births[ev.NewPath] = birth
		case kindEntry:
			var b *stamp
			if hadBirth {
				b = &birth
			}
			cs.fill(r, c.key, ev.NewPath, st, b)
		}
	}
}

// failed records a lookup of an absent entry, or (created) the creation
// of an entry directory.
func (cs *cacheState) failed(r *rootState, key string, st stamp, created bool) {
	r.look(st.pid, key)
	e := r.entry(key)
	if _, hit := e.hitBy[st.pid]; hit && !created {
		return // an optional file of an entry it already found
	}
	if m := e.marks[st.pid]; m != nil {
		m.created = m.created || created
		return
	}
	e.marks[st.pid] = &mark{stamp: st, created: created}
	if created {
		e.own[st.pid] = true
	}
	if e.open == nil {
		e.open = &episode{root: r, key: key, start: st}
	}
}

// read records an open for reading of an existing entry file.
func (cs *cacheState) read(r *rootState, key string, st stamp) {
	r.look(st.pid, key)
	e := r.entry(key)
	if e.own[st.pid] {
		return // reading back what it wrote, or inside an entry it created
	}
	if m := e.marks[st.pid]; m != nil {
		// The entry is there after all: the failed lookup was for
		// something optional.
		delete(e.marks, st.pid)
		if e.open != nil && e.open.start.pid == st.pid {
			e.open = nil
			for _, om := range e.marks {
				e.open = &episode{root: r, key: key, start: om.stamp}
				break
			}
		}
	}
	if _, ok := e.hitBy[st.pid]; !ok {
		e.hitBy[st.pid] = st
		r.hits++
		r.countStack(&r.stackHits, st.stack, 1)
		r.keys.hit.add(key)
	}
}

// fill records a write of an entry: a rename into place (birth is when
// the temp name was created, if seen) or a file created in place.
func (cs *cacheState) fill(r *rootState, key, p string, st stamp, birth *stamp) {
	r.fills[p] = true
	e := r.entry(key)
	ep := e.open
	if ep == nil && e.last != nil && e.last.end.pid == st.pid && len(e.marks) == 0 {
		// Another file of the entry it just filled.
		e.last.end = st
		return
	}
	if ep == nil {
		start := st
		if h, ok := e.hitBy[st.pid]; ok {
			// It read the entry and wrote it again: the entry was
			// stale, so the read was a miss.
			delete(e.hitBy, st.pid)
			r.hits--
			r.countStack(&r.stackHits, h.stack, -1)
			r.stale++
			r.keys.stale.add(key)
			r.keys.hit.remove(key)
			start = h
		} else if birth != nil {
			start = *birth
		}
		ep = &episode{root: r, key: key, start: start}
		e.marks[start.pid] = &mark{stamp: start}
	}
	for pid, m := range e.marks {
		r.misses++
		r.countStack(&r.stackMisses, m.stack, 1)
		e.own[pid] = true
	}
	r.keys.missed.add(key)
	clear(e.marks)
	e.own[st.pid] = true
	ep.end = st
	ep.filled = true
	r.written++
	r.keys.written.add(key)
	r.episodes = append(r.episodes, ep)
	e.open = nil
	e.last = ep
}

// countStack adds d to (*m)[stack], made on first use; a stack of 0 (none)
// is not kept.
func (r *rootState) countStack(m *map[uint64]uint64, stack uint64, d int) {
	if stack == 0 {
		return
	}
	if *m == nil {
		*m = map[uint64]uint64{}
	}
	if d < 0 {
		if (*m)[stack] > 0 {
			(*m)[stack]--
		}
		return
	}
	(*m)[stack] += uint64(d)
}

// finish counts the failed lookups that were never filled as misses.
func (cs *cacheState) finish() {
	for _, r := range cs.roots.byKey {
		for key, e := range r.entries {
			if len(e.marks) > 0 {
				r.keys.missed.add(key)
			}
			r.misses += uint64(len(e.marks))
			for _, m := range e.marks {
				r.countStack(&r.stackMisses, m.stack, 1)
			}
			clear(e.marks)
			e.open = nil
		}
	}
}

// sortedRoots returns every root state in a stable order.
func (cs *cacheState) sortedRoots() []*rootState {
	out := make([]*rootState, 0, len(cs.roots.byKey))
	for _, r := range cs.roots.byKey {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].root.Spec.Name != out[j].root.Spec.Name {
			return out[i].root.Spec.Name < out[j].root.Spec.Name
		}
		return out[i].root.Path < out[j].root.Path
	})
	return out
}

// SyscallOp maps an x86_64 syscall number to the operation it performs.
func SyscallOp(nr int32) (Op, bool) {
	switch nr {
	case unix.SYS_OPEN, unix.SYS_CREAT, unix.SYS_OPENAT, unix.SYS_OPENAT2:
		return OpOpen, true
	case unix.SYS_STAT, unix.SYS_LSTAT, unix.SYS_ACCESS, unix.SYS_NEWFSTATAT, unix.SYS_FACCESSAT, unix.SYS_STATX, unix.SYS_FACCESSAT2:
		return OpLookup, true
	case unix.SYS_MKDIR, unix.SYS_MKDIRAT:
		return OpMkdir, true
	case unix.SYS_RENAME, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2:
		return OpRename, true
	case unix.SYS_UNLINK, unix.SYS_UNLINKAT:
		return OpUnlink, true
	case unix.SYS_CHDIR, unix.SYS_FCHDIR:
		return OpChdir, true
	}
	return 0, false
}

// openBroke says whether a failed open under a root is the cache
// breaking rather than a lookup: a lookup fails with ENOENT, a creation
// racing another process's with EEXIST; anything else (EACCES, EROFS,
// ESTALE, EBUSY), or a file that cannot be created (ENOENT with O_CREAT:
// its directory went away), means an entry cannot be read or written.
func openBroke(ev *FileEvent, write bool) bool {
	switch ev.Errno {
	case 0, errEEXIST:
		return false
	case errENOENT:
		return write && ev.Flags&oCreat != 0
	}
	return true
}

// failedRename records a rename under a root that failed: into an entry
// (the compiled entry is not kept), or of a temp name.
func (cs *cacheState) failedRename(ev *FileEvent, st stamp) {
	for _, p := range []string{ev.NewPath, ev.Path} {
		r, rel := cs.roots.match(p)
		if r == nil {
			continue
		}
		c := entryOf(r, p, rel)
		if c.kind == kindIgnored {
			continue
		}
		r.failure("rename", ev.Errno, ev.NewPath, st)
		if c.kind == kindEntry && p == ev.NewPath {
			cs.notKept(r, c.key, st)
		}
		return
	}
}

// maxFailPIDs bounds the processes kept per kind of failure.
const maxFailPIDs = 64

// failure counts one failed call of op under r.
func (r *rootState) failure(op string, errno int, p string, st stamp) {
	if r.failures == nil {
		r.failures = map[failKey]*failAgg{}
	}
	k := failKey{op, errno}
	f := r.failures[k]
	if f == nil {
		f = &failAgg{first: st, path: p, pids: map[int32]bool{}}
		r.failures[k] = f
	}
	f.count++
	if len(f.pids) < maxFailPIDs {
		f.pids[st.pid] = true
	}
}

// failureRecords are r's failed calls for the record, most first; rel
// turns a CLOCK_MONOTONIC time into the run's.
func (r *rootState) failureRecords(rel func(uint64) int64) []record.CacheFailure {
	var out []record.CacheFailure
	for k, f := range r.failures {
		name := unix.ErrnoName(unix.Errno(k.errno))
		if name == "" {
			name = fmt.Sprintf("errno %d", k.errno)
		}
		pids := make([]int32, 0, len(f.pids))
		for pid := range f.pids {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		out = append(out, record.CacheFailure{Op: k.op, Errno: name, Count: f.count, Path: f.path, FirstNS: rel(f.first.ts), PIDs: pids})
	}
	slices.SortFunc(out, func(a, b record.CacheFailure) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Op, b.Op), cmp.Compare(a.Errno, b.Errno))
	})
	return out
}

// notKept ends the open miss of an entry whose rename into place failed:
// its compile happened (and is charged to the cache) but nothing was
// kept, so the miss stays a miss and no entry counts as written.
func (cs *cacheState) notKept(r *rootState, key string, st stamp) {
	e := r.entry(key)
	ep := e.open
	if ep == nil {
		return
	}
	ep.end, ep.lost = st, true
	r.episodes = append(r.episodes, ep)
	e.open = nil
}
