package trace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/internal/marks"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/jit"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/pystack"
	"github.com/coldtrace/coldtrace/trace/samples"
	"github.com/coldtrace/coldtrace/trace/target"
)

// ErrTarget marks a process or cgroup that cannot be attached to.
var ErrTarget = errors.New("cannot attach")

// AttachOptions configure coldtrace attach: Options as for Run (Command
// is ignored), and what to attach to.
type AttachOptions struct {
	Options
	// PIDs are processes to trace with everything they fork from now on.
	PIDs []int
	// Cgroup is a cgroup directory (v1 or v2): its processes, and those
	// placed in it later, are traced.
	Cgroup string
	// Duration ends the trace after this long (0: until a signal, the
	// context, or the processes' exit).
	Duration time.Duration
	// Marks deliver mark labels as they arrive.
	Marks <-chan marks.Mark
	// OnAttached is told once every process is seeded.
	OnAttached func(a record.Attached)
	// OnTracking is told the processes seeded so far, after the attach
	// and whenever a process joins the cgroup.
	OnTracking func(pids []int)
	// Check is asked about each process before it is traced (the actor's
	// right to trace it, another trace already on it); an error refuses
	// that process.
	Check func(pid int) error
}

// seedHeadroom are thread slots set aside beyond the threads found at
// attach: threads started while the seeding runs, and (with a cgroup)
// processes placed in it later. Forks of tracked threads take kernel
// slots.
const (
	seedHeadroom   = 256
	cgroupHeadroom = 4096
	// exitCheckEvery is how often the session looks whether every traced
	// process has exited.
	exitCheckEvery = 500 * time.Millisecond
)

// Attach traces processes already running until ctx ends, a signal
// arrives, the duration passes, or every traced process has exited
// (with a cgroup: never on exits, processes may join it later).
func Attach(ctx context.Context, o AttachOptions) (*record.Record, error) {
	opts := o.Options.withDefaults()
	o.Options = opts
	if len(o.PIDs) == 0 && o.Cgroup == "" {
		return nil, fmt.Errorf("%w: give --pid or --cgroup", ErrTarget)
	}
	procs, err := o.lookTargets()
	if err != nil {
		return nil, err
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	if !opts.Actor.Resolved() {
		return nil, fmt.Errorf("%w: actor not resolved", ErrPreflight)
	}
	s := &session{ctx: ctx, opts: opts, timeline: samples.New(opts.Timeline)}
	if err := s.load(); err != nil {
		s.close()
		return nil, err
	}
	defer s.close()
	if opts.Loaded != nil {
		opts.Loaded()
	}
	s.background()
	threads := 0
	for _, p := range procs {
		threads += len(p.TIDs)
	}
	head := seedHeadroom
	if o.Cgroup != "" {
		head = cgroupHeadroom
	}
	if err := s.sched.Reserve(threads + head); err != nil {
		return nil, err
	}
	a := &attacher{s: s, o: o, seeded: map[int]bool{}, refused: map[int]bool{}}
	s.rec = &record.Record{Schema: record.Schema, Version: opts.Version, Command: attachCommand(o, procs),
		User: record.User{UID: opts.Actor.Command.UID, GID: opts.Actor.Command.GID, Name: opts.Actor.Command.Name, Home: opts.Actor.Command.Home},
		Host: hostInfo(), IntervalNS: opts.Interval.Nanoseconds()}
	s.startMono = probe.MonotonicNS()
	for _, sn := range s.sensors {
		sn.Begin(s.startMono)
	}
	s.rec.Start = time.Now()
	for _, p := range procs {
		a.seed(p)
	}
	opts.Notify(fmt.Sprintf("seeded %d threads of %d processes in %v", a.threads, len(a.seeded), time.Since(s.rec.Start).Round(time.Microsecond)))
	if len(a.seeded) == 0 && o.Cgroup == "" {
		return nil, fmt.Errorf("%w: every process exited during the attach", ErrTarget)
	}
	att := &record.Attached{Cgroup: o.Cgroup, Processes: len(a.seeded), Threads: a.threads}
	for _, pid := range o.PIDs {
		att.PIDs = append(att.PIDs, int32(pid))
	}
	s.rec.Attached = att
	s.rec.StartupNS = time.Since(opts.Launched).Nanoseconds()
	if o.OnAttached != nil {
		o.OnAttached(*att)
	}
	a.tracking()
	s.ckpt = newCheckpoints(opts.Checkpoint, opts.CheckpointEvery)
	a.loop()
	return a.finish(), nil
}

// lookTargets reads the named processes (or the cgroup's) and refuses
// bad ones with one line each.
func (o AttachOptions) lookTargets() ([]target.Proc, error) {
	pids := o.PIDs
	if o.Cgroup != "" {
		if err := target.CheckCgroup(o.Cgroup); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTarget, err)
		}
		cg, err := target.CgroupPIDs(o.Cgroup)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTarget, err)
		}
		pids = append(append([]int(nil), pids...), cg...)
	}
	self := os.Getpid()
	var procs []target.Proc
	for _, pid := range pids {
		if pid == self {
			if o.Cgroup != "" {
				continue // coldtrace itself in the cgroup is never traced
			}
			return nil, fmt.Errorf("%w: pid %d is coldtrace itself", ErrTarget, pid)
		}
		p, err := target.Look(pid)
		if err != nil {
			if o.Cgroup != "" && (errors.Is(err, target.ErrNoProcess) || errors.Is(err, target.ErrKernelThread)) {
				continue // left the cgroup meanwhile; kernel threads are not work
			}
			return nil, fmt.Errorf("%w: %v", ErrTarget, err)
		}
		if o.Check != nil {
			if err := o.Check(pid); err != nil {
				if o.Cgroup != "" && len(o.PIDs) == 0 {
					continue // not the user's: the cgroup's other processes are
				}
				return nil, fmt.Errorf("%w: %v", ErrTarget, err)
			}
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func attachCommand(o AttachOptions, procs []target.Proc) []string {
	if o.Cgroup != "" {
		return []string{"cgroup:" + o.Cgroup}
	}
	if len(procs) == 1 && len(procs[0].Args) > 0 {
		return procs[0].Args
	}
	names := make([]string, 0, len(procs))
	for _, p := range procs {
		names = append(names, strconv.Itoa(p.PID)+":"+p.Comm)
	}
	return []string{"pids " + strings.Join(names, " ")}
}

// attacher is the attach-specific part of a session.
type attacher struct {
	s       *session
	o       AttachOptions
	seeded  map[int]bool
	refused map[int]bool
	threads int
}

// seed tracks every thread of p. Threads started while the seeding runs,
// by a thread not yet seeded, are caught by listing the threads again
// until no new one shows up.
func (a *attacher) seed(p target.Proc) {
	now := probe.MonotonicNS()
	tids := p.TIDs
	seededAny := false
	for pass := 0; pass < 5 && len(tids) > 0; pass++ {
		fresh := 0
		for _, tid := range tids {
			ok, err := a.s.sched.SeedThread(p.PID, tid, now)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "no such process") {
					a.s.opts.Notify(err.Error())
				}
				continue
			}
			if ok {
				fresh++
				a.threads++
				seededAny = true
			}
		}
		if fresh == 0 {
			break
		}
		next, err := target.Threads(p.PID)
		if err != nil {
			break
		}
		tids = next
	}
	if !seededAny {
		return
	}
	a.seeded[p.PID] = true
	a.s.sched.Named(p.PID, p.Comm, p.Exe, p.Args)
	a.s.uprobes.TrackExisting(int32(p.PID))
	for _, sn := range a.s.sensors {
		if j, ok := sn.(*jit.Sensor); ok {
			j.Existing(int32(p.PID), p.Exe)
		}
		if ps, ok := sn.(*pystack.Sensor); ok {
			ps.Seed(p.PID)
		}
	}
}

// tracking tells OnTracking the processes seeded so far.
func (a *attacher) tracking() {
	if a.o.OnTracking == nil {
		return
	}
	pids := make([]int, 0, len(a.seeded))
	for pid := range a.seeded {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	a.o.OnTracking(pids)
}

// rescan seeds processes placed in the cgroup since the last look.
func (a *attacher) rescan() {
	before := len(a.seeded)
	defer func() {
		if len(a.seeded) != before {
			a.tracking()
		}
	}()
	pids, err := target.CgroupPIDs(a.o.Cgroup)
	if err != nil {
		return // the cgroup was removed: its processes left it
	}
	tracked := a.s.sched.Tracked()
	for _, pid := range pids {
		if a.seeded[pid] || a.refused[pid] || tracked.Has(int32(pid)) || pid == os.Getpid() {
			continue
		}
		p, err := target.Look(pid)
		if err != nil {
			continue
		}
		if a.o.Check != nil && a.o.Check(pid) != nil {
			a.refused[pid] = true // not the user's: never looked at again
			continue
		}
		a.seed(p)
	}
}

// loop polls until the trace ends; the first signal ends it (the traced
// processes run on: they are not coldtrace's).
func (a *attacher) loop() {
	s := a.s
	ticker := time.NewTicker(s.opts.Interval)
	defer ticker.Stop()
	exitCheck := time.NewTicker(exitCheckEvery)
	defer exitCheck.Stop()
	var deadline <-chan time.Time
	if a.o.Duration > 0 {
		t := time.NewTimer(a.o.Duration)
		defer t.Stop()
		deadline = t.C
	}
	markc := a.o.Marks
	for {
		select {
		case <-ticker.C:
			if a.o.Cgroup != "" {
				a.rescan()
			}
			s.poll(probe.MonotonicNS(), false)
		case <-s.ckpt.tick():
			s.checkpoint()
		case m, ok := <-markc:
			if !ok {
				markc = nil
				continue
			}
			s.mark(m)
		case <-exitCheck.C:
			if a.o.Cgroup == "" && a.allExited() {
				return
			}
		case sig := <-s.opts.Signals:
			s.opts.Notify(fmt.Sprintf("%v: detaching; the traced processes run on", sig))
			return
		case <-deadline:
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// mark records a mark at its arrival: when its datagram was read, not
// when the poll loop got to it.
func (s *session) mark(m marks.Mark) {
	at := probe.Rel(m.MonoNS, s.startMono)
	s.rec.Marks = append(s.rec.Marks, record.Mark{AtNS: at, Label: m.Label})
	s.timeline.Mark(at)
	s.opts.Notify(fmt.Sprintf("mark %q at +%.3fs", m.Label, float64(at)/1e9))
}

func (a *attacher) allExited() bool {
	pids, err := a.s.sched.LivePIDs()
	if err != nil {
		return false
	}
	return len(pids) == 0
}

// finish takes the last sample and fills the record; the processes still
// running are not an exit.
func (a *attacher) finish() *record.Record {
	s := a.s
	rec := s.rec
	end := probe.MonotonicNS()
	rec.WallNS = int64(end - s.startMono)
	s.poll(end, true)
	s.finishSensors(rec)
	return rec
}
