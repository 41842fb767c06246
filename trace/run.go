package trace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/selfsched"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/launch"
	"github.com/coldtrace/coldtrace/trace/pagecache"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/samples"
	"github.com/coldtrace/coldtrace/trace/sched"
	"github.com/coldtrace/coldtrace/trace/uprobes"
)

// Run traces opts.Command to its end and returns the record. The error is
// non-nil only when tracing itself failed; a command that fails or cannot
// be started still yields a record with its exit code.
func Run(ctx context.Context, opts Options) (*record.Record, error) {
	s, err := start(ctx, opts.withDefaults())
	if err != nil {
		return nil, err
	}
	defer s.close()
	if err := s.launch(); err != nil {
		return nil, err
	}
	state := s.loop()
	return s.finish(state), nil
}

// session is one traced run.
type session struct {
	ctx     context.Context
	opts    Options
	sched   *sched.Sensor
	uprobes *uprobes.Scoper
	sensors []Sensor // load order; sched first
	child   *launch.Child
	rec     *record.Record
	// startMono is when the command was released (CLOCK_MONOTONIC ns).
	startMono  uint64
	foreground bool
	timeline   *samples.Store
	room       struct{ threads, files int } // the last poll's deltas
	pollErr    error
	ckpt       *checkpoints
	watch      *launch.Watch // --kill-on-exit
	gated      *gatedStart   // the command's shim, started during the load
	// restoreSched puts coldtrace's threads back under their
	// scheduling policy (background).
	restoreSched func() error
}

// start checks the machine and loads every sensor.
func start(ctx context.Context, opts Options) (*session, error) {
	if len(opts.Command) == 0 {
		return nil, fmt.Errorf("%w: no command given", ErrPreflight)
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	if !opts.Actor.Resolved() {
		return nil, fmt.Errorf("%w: %v", ErrPreflight, actor.ErrUnresolved)
	}
	s := &session{ctx: ctx, opts: opts, timeline: samples.New(opts.Timeline)}
	// The shim starts (a fork, an exec, its runtime's start, the
	// program's lookup) while the sensors load: it waits on its gate
	// until launch, and was some 10 ms of a start otherwise.
	s.startGated()
	if err := s.load(); err != nil {
		s.abortGated()
		s.close()
		return nil, err
	}
	if s.opts.Loaded != nil {
		s.opts.Loaded()
	}
	return s, nil
}

// gatedStart is the command's shim, started in the background.
type gatedStart struct {
	done  chan struct{}
	child *launch.Child
	err   error
}

// wait returns the started shim, once it waits on its gate.
func (g *gatedStart) wait() (*launch.Child, error) {
	<-g.done
	return g.child, g.err
}

// startGated starts the command's shim in the background.
func (s *session) startGated() {
	s.foreground = inForeground()
	a := s.opts.Actor
	spec := launch.Spec{Argv: s.opts.Command, User: a.Command, SwitchUser: a.SwitchCommand,
		Env: launch.CommandEnv(s.opts.Env, a.Command, a.SwitchCommand)}
	stdio := launch.Stdio{Stdin: s.opts.Stdin, Stdout: s.opts.Stdout, Stderr: s.opts.Stderr}
	g := &gatedStart{done: make(chan struct{})}
	go func() {
		defer close(g.done)
		g.child, g.err = launch.Start(spec, stdio, s.foreground)
	}()
	s.gated = g
}

// abortGated kills the shim of a run that failed to load; the terminal
// it was given comes back.
func (s *session) abortGated() {
	if s.gated == nil {
		return
	}
	child, err := s.gated.wait()
	if err != nil {
		return
	}
	child.Abort()
	if s.foreground {
		reclaimTerminal()
	}
}

// trackGated covers the gated command with the uprobe links of the
// libraries known now, once the sensors that own uprobes are loaded
// (makeUprobes).
// Its links follow it through its exec: those libraries are probed from
// the command's first instruction. They are made before the seed:
// registering a uprobe takes tens of milliseconds under load, and
// between the seed and the run's start that time counted in the
// thread's life but not in its process's; made here, it overlaps the
// other sensors' loads.
func (s *session) trackGated(links *uprobes.Scoper) {
	if s.gated == nil {
		return // an attach: no command to start
	}
	child, err := s.gated.wait()
	if err != nil {
		return
	}
	// What the program can call, read before it runs: the gated probes
	// (getaddrinfo's) go into a command that can call them, or run a
	// program that can in its own process (env curl …), from its first
	// instruction, and into no other.
	programs, err := child.FirstPrograms()
	if err != nil {
		programs = nil // unknown: probed
	}
	links.TrackProgram(int32(child.Pid()), programs)
}

// launch takes the command's gated shim, seeds it into the tracked set
// and releases it.
func (s *session) launch() error {
	a := s.opts.Actor
	child, err := s.gated.wait()
	if err != nil {
		return err
	}
	pid := child.Pid() // its uprobe links were made during the load (trackGated)
	if err := s.sched.Seed(pid, commName(s.opts.Command[0]), probe.MonotonicNS()); err != nil {
		child.Abort()
		return err
	}
	if s.opts.KillOnExit {
		if s.watch, err = launch.StartWatch(pid); err != nil {
			child.Abort()
			return err
		}
	}
	select {
	case sig := <-s.opts.Signals:
		child.Abort()
		return fmt.Errorf("interrupted by %v before the command started", sig)
	default:
	}
	// The command's shim exists: it keeps the policy it was made with.
	s.background()
	s.child = child
	rec := &record.Record{Schema: record.Schema, Version: s.opts.Version, Command: s.opts.Command,
		User: record.User{UID: a.Command.UID, GID: a.Command.GID, Name: a.Command.Name, Home: a.Command.Home},
		Host: hostInfo(), IntervalNS: s.opts.Interval.Nanoseconds()}
	s.startMono = probe.MonotonicNS()
	for _, sn := range s.sensors {
		sn.Begin(s.startMono)
	}
	rec.Start = time.Now()
	rec.StartupNS = time.Since(s.opts.Launched).Nanoseconds()
	s.rec = rec
	s.ckpt = newCheckpoints(s.opts.Checkpoint, s.opts.CheckpointEvery)
	if err := child.Release(); err != nil {
		rec.StartError = err.Error()
	}
	if s.opts.OnStart != nil && rec.StartError == "" {
		s.opts.OnStart(pid)
	}
	return nil
}

// loop polls the sensors every interval and handles signals until the
// command exits, and returns how it ended.
func (s *session) loop() *os.ProcessState {
	waited := make(chan *os.ProcessState, 1)
	go func() { waited <- s.child.Wait() }()
	ticker := time.NewTicker(s.opts.Interval)
	defer ticker.Stop()
	ctxDone := s.ctx.Done()
	markc := s.opts.Marks
	signals := 0
	for {
		select {
		case <-ticker.C:
			s.poll(probe.MonotonicNS(), false)
		case <-s.ckpt.tick():
			s.checkpoint()
		case m, ok := <-markc:
			if !ok {
				markc = nil
				continue
			}
			s.mark(m)
		case sig := <-s.opts.Signals:
			s.rec.Interrupted = true
			signals++
			s.signal(sig, signals)
		case <-ctxDone:
			s.rec.Interrupted = true
			ctxDone = nil
			if err := s.child.SignalGroup(syscall.SIGTERM); err != nil {
				s.opts.Notify(err.Error())
			}
		case state := <-waited:
			return state
		}
	}
}

// signal passes the first and second signal to the command's process
// group and kills every tracked process at the third.
func (s *session) signal(sig os.Signal, n int) {
	if n >= 3 {
		s.opts.Notify(fmt.Sprintf("%v received %d times: killing the command and every process it started", sig, n))
		s.killAll()
		return
	}
	s.opts.Notify(fmt.Sprintf("%v: passing it to the command (pid %d); the report follows when it exits", sig, s.child.Pid()))
	ssig, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	if err := s.child.SignalGroup(ssig); err != nil {
		s.opts.Notify(err.Error())
	}
}

// killAll sends SIGKILL to the command's process group and to every
// process of the tracked set that is still alive, those that left the
// group (setsid, a daemon) included.
func (s *session) killAll() {
	if err := s.child.SignalGroup(syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.opts.Notify(err.Error())
	}
	pids, err := s.sched.LivePIDs()
	if err != nil {
		s.opts.Notify(fmt.Sprintf("cannot list the tracked processes to kill: %v", err))
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			s.opts.Notify(fmt.Sprintf("kill pid %d: %v", pid, err))
		}
	}
}

// The page cache's file table is read only when a sample closes.
var _ LazyPoller = (*pagecache.Sensor)(nil)

// poll takes one sample from every sensor; a LazyPoller only when the
// sample closes one of the timeline's, or when all is set (the last poll).
func (s *session) poll(now uint64, all bool) {
	// Room for as many deltas as last time: the sensors' appends would
	// otherwise double their way up every poll.
	sample := record.Sample{EndNS: probe.Rel(now, s.startMono),
		Threads: make([]record.ThreadDelta, 0, s.room.threads), Files: make([]record.FileDelta, 0, s.room.files)}
	closes := all || s.timeline.Closes(sample.EndNS)
	for _, sn := range s.sensors {
		if _, lazy := sn.(LazyPoller); lazy && !closes {
			continue
		}
		if err := sn.Poll(now, &sample); err != nil && s.pollErr == nil {
			s.pollErr = err
		}
	}
	s.room.threads = len(sample.Threads)
	if closes {
		s.room.files = len(sample.Files)
	}
	s.timeline.Add(sample)
	if s.opts.OnSample != nil {
		s.opts.OnSample(sample)
	}
}

// finish takes the last sample and has every sensor fill its part of the
// record.
func (s *session) finish(state *os.ProcessState) *record.Record {
	rec := s.rec
	running := s.stillRunning()
	end := probe.MonotonicNS()
	if err := s.watch.Done(); err != nil {
		rec.Warnings = append(rec.Warnings, err.Error())
	}
	rec.WallNS = int64(end - s.startMono)
	s.poll(end, true)
	rec.ExitCode, rec.Signal = exitCode(state)
	if rec.StartError != "" {
		rec.ExitCode = 127
	}
	s.sched.Exited(s.child.Pid(), rec.WallNS, rec.ExitCode)
	s.finishSensors(rec)
	if len(running) > 0 {
		rec.Warnings = append(rec.Warnings, runningWarning(running, rec.Processes))
	}
	return rec
}

// stillRunning are the tracked processes alive when the command exited:
// the run ends with the command, so they are not traced further.
func (s *session) stillRunning() []int {
	pids, err := s.sched.LivePIDs()
	if err != nil {
		s.opts.Notify(fmt.Sprintf("cannot list the processes still running: %v", err))
		return nil
	}
	var alive []int
	for _, pid := range pids {
		if pid != s.child.Pid() && syscall.Kill(pid, 0) == nil {
			alive = append(alive, pid)
		}
	}
	return alive
}

// runningWarning names the processes still running at exit ("2 processes
// still running at exit, not traced further: 41 sleep, 42 sleep").
func runningWarning(pids []int, procs []record.Process) string {
	comm := map[int]string{}
	for _, p := range procs {
		comm[int(p.PID)] = p.Comm
	}
	names := make([]string, 0, len(pids))
	for i, pid := range pids {
		if i == 10 {
			names = append(names, fmt.Sprintf("and %d more", len(pids)-i))
			break
		}
		names = append(names, strings.TrimSpace(fmt.Sprintf("%d %s", pid, comm[pid])))
	}
	noun := "processes"
	if len(pids) == 1 {
		noun = "process"
	}
	return fmt.Sprintf("%d %s still running at exit, not traced further: %s", len(pids), noun, strings.Join(names, ", "))
}

// background has coldtrace's threads stop preempting the traced
// processes on their CPUs while they run (internal/selfsched); close
// undoes it. A failure costs only that, and is noted.
func (s *session) background() {
	restore, err := selfsched.Background()
	s.restoreSched = restore
	if err != nil {
		s.opts.Notify(fmt.Sprintf("coldtrace's threads keep preempting the command: %v", err))
	}
}

// close releases every sensor, the last loaded first.
func (s *session) close() {
	if s.restoreSched != nil {
		if err := s.restoreSched(); err != nil {
			s.opts.Notify(fmt.Sprintf("restore coldtrace's scheduling policy: %v", err))
		}
		s.restoreSched = nil
	}
	if s.foreground && s.child != nil {
		reclaimTerminal()
	}
	if err := s.watch.Done(); err != nil {
		s.opts.Notify(err.Error())
	}
	for i := len(s.sensors) - 1; i >= 0; i-- {
		if err := s.sensors[i].Close(); err != nil {
			s.opts.Notify(fmt.Sprintf("release probes: %v", err))
		}
	}
	s.sensors = nil
}

// finishSensors closes a run or an attach alike, after the last poll: the
// samples, the checkpoints' and the polls' warnings, each sensor's part of
// the record, and coldtrace's own cost. A sensor that fails leaves a
// warning; the others still finish.
func (s *session) finishSensors(rec *record.Record) {
	rec.Samples = s.timeline.Samples()
	rec.Coarsened = s.timeline.Coarsening()
	if w := s.ckpt.stop(); w != "" {
		rec.Warnings = append(rec.Warnings, w)
	}
	if s.pollErr != nil {
		rec.Warnings = append(rec.Warnings, s.pollErr.Error())
	}
	for _, sn := range s.sensors {
		if err := sn.Finish(rec); err != nil {
			rec.Warnings = append(rec.Warnings, err.Error())
		}
	}
	rec.Self = selfCost(rec.Self)
}
