package jit

import (
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// The path-syscall probes are the one source whose cost reaches every
// task of the machine: an attached syscall tracepoint puts each task on
// the syscall slow path (docs/sources.md). They are attached only while a
// process uses a framework whose cache rules nothing cheaper sees, and
// taken off again once no such process remains.

// pathSpan is one interval in which the path-syscall probes were attached.
type pathSpan struct {
	from, to         time.Time // to: zero while attached
	fromMono, toMono uint64    // CLOCK_MONOTONIC; toMono 0 while attached
	why, off         string
}

// pathUsers tracks the processes that keep the path-syscall probes
// attached: the processes whose use of a framework brought them in, and
// every process forked from one (a compiler or compile worker fills the
// framework's cache). sticky is set when they were attached for the whole
// run (an option, or the command itself runs a framework).
type pathUsers struct {
	sticky    bool
	pids      map[int32]bool
	checkedAt uint64 // CLOCK_MONOTONIC of the last liveness check
	links     []link.Link
	spans     []pathSpan
	// closing: links being closed in the background. Closing a syscall
	// tracepoint's perf event waits for the kernel (some 60 ms each, 36
	// in all: 2.3 s), which in Poll held up marks and samples.
	closing  sync.WaitGroup
	closeMu  sync.Mutex
	closeErr []string
}

// pathCheckEvery is how often Poll looks whether a process that keeps the
// path-syscall probes attached is still alive.
const pathCheckEvery = time.Second

// attached says whether the path-syscall probes are attached now.
func (u *pathUsers) attached() bool {
	return len(u.spans) > 0 && u.spans[len(u.spans)-1].toMono == 0
}

// everAttached says whether they were attached at some point of the run.
func (u *pathUsers) everAttached() bool { return len(u.spans) > 0 }

// covers says whether the path-syscall probes were attached at ts
// (CLOCK_MONOTONIC): their events, not the page cache's, tell what
// happened then.
func (u *pathUsers) covers(ts uint64) bool {
	for _, s := range u.spans {
		if ts >= s.fromMono && (s.toMono == 0 || ts < s.toMono) {
			return true
		}
	}
	return false
}

// forked keeps the probes for a child of a process that keeps them.
func (u *pathUsers) forked(pid, ppid int32) {
	if u.pids[ppid] {
		u.pids[pid] = true
	}
}

// needSyscalls attaches the path-syscall probes for process pid (0: for
// the whole run), saying why. Called with e.mu held.
func (e *Sensor) needSyscalls(pid int32, why string) error {
	u := &e.path
	if pid == 0 {
		u.sticky = true
	} else {
		if u.pids == nil {
			u.pids = map[int32]bool{}
		}
		u.pids[pid] = true
	}
	if u.attached() {
		return nil
	}
	return e.attachSyscalls(why)
}

// attachSyscalls attaches the path-syscall probes. Called with e.mu held.
func (e *Sensor) attachSyscalls(why string) error {
	progs, err := e.pathProgs.get()
	if err != nil {
		return err
	}
	u := &e.path
	if u.everAttached() {
		// Back after a gap: what the collector knows of cwds and open
		// descriptors may have changed unseen meanwhile.
		e.col.forgetPaths()
	}
	e.col.PathSyscalls = true
	if err := e.wakes.promptAll(true); err != nil {
		return fmt.Errorf("wake the reader at every exec and fork: %w", err)
	}
	// Before the first exit program runs, so that no open waits on a
	// verdict that was held back.
	e.quiet.attach()
	enter := []*ebpf.Program{nil, progs.OnPathEnter1, progs.OnPathEnter2, progs.OnPathEnter3, progs.OnPathEnter4, progs.OnPathEnter5}
	type attached struct {
		name, dir string
		nargs     int
		l         link.Link
		err       error
	}
	// All at once: each link waits on the kernel (as each close does),
	// and one after the other the 36 took 1.3-1.9 s beside two busy
	// loops (20-90 ms quiet), longer than a whole PyOpenCL run on a warm
	// cache, whose lookups then went unseen. Made concurrently they took
	// 7-24 ms.
	links := make([]attached, 0, 2*len(jitSyscalls))
	for _, sc := range jitSyscalls {
		for _, dir := range []string{"enter", "exit"} {
			links = append(links, attached{name: sc.name, dir: dir, nargs: sc.nargs})
		}
	}
	var wg sync.WaitGroup
	for i := range links {
		a := &links[i]
		prog := enter[a.nargs]
		if a.dir == "exit" {
			prog = progs.OnPathExit
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.l, a.err = link.Tracepoint("syscalls", "sys_"+a.dir+"_"+a.name, prog, nil)
		}()
	}
	wg.Wait()
	var openatErr error
	for _, a := range links {
		switch {
		case a.err == nil:
			u.links = append(u.links, a.l)
		case a.name == "openat":
			if openatErr == nil {
				openatErr = fmt.Errorf("attach tracepoint syscalls:sys_%s_%s: %w", a.dir, a.name, a.err)
			}
		case !u.everAttached():
			e.warnings = append(e.warnings, fmt.Sprintf("jit: no tracepoint syscalls:sys_%s_%s (%v); %s calls are not seen", a.dir, a.name, a.err, a.name))
		}
	}
	if openatErr != nil {
		e.closeSyscallLinks()
		return openatErr
	}
	u.spans = append(u.spans, pathSpan{from: time.Now(), fromMono: probe.MonotonicNS(), why: why})
	return nil
}

// detachSyscalls takes the path-syscall probes off. Called with e.mu held.
func (e *Sensor) detachSyscalls(why string) {
	u := &e.path
	if !u.attached() {
		return
	}
	e.closeSyscallLinks()
	_ = e.wakes.promptAll(false) // failed, execs and forks only wake it more often
	s := &u.spans[len(u.spans)-1]
	s.to, s.toMono, s.off = time.Now(), probe.MonotonicNS(), why
}

func (e *Sensor) closeSyscallLinks() {
	u := &e.path
	links := u.links
	u.links = nil
	if len(links) == 0 {
		return
	}
	u.closing.Add(1)
	go func() {
		defer u.closing.Done()
		var wg sync.WaitGroup
		for _, l := range links {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Close(); err != nil {
					u.closeMu.Lock()
					u.closeErr = append(u.closeErr, fmt.Sprintf("jit: detach a path-syscall probe: %v", err))
					u.closeMu.Unlock()
				}
			}()
		}
		wg.Wait()
	}()
}

// closeWarnings are the errors of the background closes so far.
func (u *pathUsers) closeWarnings() []string {
	u.closeMu.Lock()
	defer u.closeMu.Unlock()
	w := u.closeErr
	u.closeErr = nil
	return w
}

// checkPathUsers takes the path-syscall probes off once no process that
// needs them is alive (a zombie still is, until reaped). Events already in
// the ring are read all the same. Called with e.mu held.
func (e *Sensor) checkPathUsers(now uint64) {
	u := &e.path
	if u.sticky || !u.attached() || now < u.checkedAt+uint64(pathCheckEvery) {
		return
	}
	u.checkedAt = now
	for pid := range u.pids {
		if !processAlive(pid) {
			delete(u.pids, pid)
		}
	}
	if len(u.pids) == 0 {
		e.detachSyscalls("no process using a framework that needs them remained")
	}
}

// pathSyscallsResult fills the record's account of the path-syscall
// probes: the summary sentence and each interval they were on.
func (e *Sensor) pathSyscallsResult(j *record.JIT, start time.Time, wallNS int64) {
	u := &e.path
	if !u.everAttached() {
		j.PathSyscalls = "not traced: no process used a framework whose cache lookups need them (Python's bytecode cache, downloads and weights caches are told from the page cache and the network)"
		return
	}
	first := u.spans[0]
	if !first.from.After(start) {
		j.PathSyscalls = "traced from the start (" + first.why + ")"
	} else {
		j.PathSyscalls = fmt.Sprintf("traced from +%v, when %s; cache lookups before that are not counted",
			first.from.Sub(start).Round(time.Millisecond), first.why)
	}
	rel := func(t time.Time) int64 {
		if d := t.Sub(start); d > 0 {
			return int64(d)
		}
		return 0
	}
	for _, s := range u.spans {
		span := record.PathSyscallSpan{FromNS: rel(s.from), ToNS: wallNS, Reason: s.why, Off: s.off}
		if !s.to.IsZero() {
			span.ToNS = rel(s.to)
		}
		if span.FromNS >= wallNS {
			// Attached for an event read after the run ended (the ring
			// is drained at the end): it covered none of the run.
			continue
		}
		j.PathSyscallSpans = append(j.PathSyscallSpans, span)
	}
	n := len(j.PathSyscallSpans)
	switch last := u.spans[len(u.spans)-1]; {
	case last.off != "":
		j.PathSyscalls += fmt.Sprintf("; off at +%v (%s), %d interval(s) in all: lookups while off are not counted",
			last.to.Sub(start).Round(time.Millisecond), last.off, n)
	case n > 1:
		j.PathSyscalls += fmt.Sprintf("; %d intervals in all: lookups between them are not counted", n)
	}
}

// forgetPaths drops what the collector knows of each process's cwd and
// open descriptors: it is read again from /proc when needed. Used when
// the path-syscall probes come back after a gap, during which chdir,
// open and close went unseen.
func (c *Collector) forgetPaths() {
	for pid, p := range c.procs {
		p.fds = map[int32]string{}
		if c.cfg.Proc != nil {
			if cwd, err := c.cfg.Proc.Cwd(pid); err == nil {
				p.cwd = cwd
			}
		}
	}
}

// needsPathSyscalls says whether a framework's use brings the path-syscall
// probes in: its cache rules include one only they see (a failed lookup,
// an EEXIST mkdir, a rename deep in the tree).
func needsPathSyscalls(s *registry.Spec) bool {
	return !s.PageCacheEvidence && !s.SeenWithoutPathSyscalls
}
