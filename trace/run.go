package trace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/download"
	"github.com/coldtrace/coldtrace/trace/evict"
	"github.com/coldtrace/coldtrace/trace/gpu"
	"github.com/coldtrace/coldtrace/trace/jit"
	"github.com/coldtrace/coldtrace/trace/launch"
	"github.com/coldtrace/coldtrace/trace/machine"
	"github.com/coldtrace/coldtrace/trace/pagecache"
	"github.com/coldtrace/coldtrace/trace/probe"
	"github.com/coldtrace/coldtrace/trace/pystack"
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
// libraries known now, once the sensors that own uprobes are loaded.
// Its links follow it through its exec: those libraries are probed from
// the command's first instruction. They are made before the seed:
// registering a uprobe takes tens of milliseconds under load, and
// between the seed and the run's start that time counted in the
// thread's life but not in its process's; made here, it overlaps the
// other sensors' loads.
func (s *session) trackGated() {
	if s.gated == nil {
		return // an attach: no command to start
	}
	if child, err := s.gated.wait(); err == nil {
		s.uprobes.Track(int32(child.Pid()), true)
	}
}

// load loads the sensors in dependency order: the scheduler creates the
// shared maps the others take.
func (s *session) load() error {
	// One kernel BTF for every load: each object decoding its own was
	// some 30 ms of CPU apiece at startup.
	kernel := btf.NewCache()
	// Decoded (some 10 ms) while the scheduler's maps are made: the
	// first load that needs it waits for it; an error is theirs to say.
	go func() { _, _ = kernel.Kernel() }()
	// A secure exec (a setuid program) stays traced only for a real
	// root login: under sudo the user would see what root read for it.
	sc, err := sched.Prepare(sched.Options{BTF: kernel, TraceSecureExec: s.opts.Actor.IsRoot()})
	if err != nil {
		return err
	}
	s.sched = sc
	s.sensors = append(s.sensors, sc)
	shared := sc.Shared().Replacements()
	// Every uprobe goes into traced processes only: the scheduler's
	// tracked set says which.
	s.uprobes = uprobes.New(uprobes.Options{LivePIDs: sc.LivePIDs})

	// The other objects take only the scheduler's maps, so every object
	// loads in lanes at once, the scheduler's programs too: the verifier
	// runs in the loading thread, and one lane after another was some
	// 150 ms of a 200 ms start on two CPUs; in two lanes the page cache's
	// was the longest by some 30 ms. Lanes: the scheduler's programs,
	// the stack walker's, the page cache (after the walker's maps),
	// evictions, JIT, network (then, with both loaded, the command's
	// uprobe links).
	var schedErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		schedErr = sc.Start()
	}()
	var j *jit.Sensor
	var jitSeen atomic.Pointer[jit.Sensor]
	var fileSeen func(probe.FileSeen)
	if !s.opts.NoJIT {
		// Path records reach the JIT sensor only once the command runs,
		// after both lanes finished; until then there is none to see.
		fileSeen = func(f probe.FileSeen) {
			if js := jitSeen.Load(); js != nil {
				js.FileSeen(f)
			}
		}
	}
	var pc *pagecache.Sensor
	var ev *evict.Sensor
	var dl *download.Sensor
	var ps *pystack.Sensor
	stacksStarted := func() *pystack.Sensor { return nil }
	var pcErr, jitErr error
	wg.Add(1)
	// Closed once the stack walker is loaded (or will not be): the
	// network probes take its maps too.
	walker := make(chan struct{})
	go func() {
		defer wg.Done()
		// The stack walker's maps first: an object that takes stacks
		// itself (bpf/include/pywalk.h) loads with them,
		// ps.Replacements(); the walker's programs load in a lane of
		// their own.
		if !s.opts.NoStacks {
			ps, stacksStarted = s.loadStacks(sc.Shared(), kernel, &wg)
		}
		close(walker)
		pc, pcErr = pagecache.New(pagecacheOptions(shared, sc.Waiting, fileSeen, kernel, ps))
	}()
	var evErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ev, evErr = evict.New(evict.Options{Shared: shared, Traced: sc.Tracked().Has, BTF: kernel, Chained: true})
	}()
	j, dl, jitErr = s.loadJITAndNetwork(sc.Shared(), kernel, &jitSeen, walker, &ps)
	wg.Wait()
	ps = stacksStarted()
	jitSeen.Store(j)

	// Poll and finish order is the table's (Sensors): the page cache
	// right after the scheduler (it adds the scheduler's ongoing I/O
	// waits to its files), evictions into the files it finished, the JIT
	// sensor after both (it reads the processes), downloads after the
	// page cache (the paths of written files) and the JIT sensor (the
	// caches they land in).
	var mach *machine.Sensor
	err = errors.Join(schedErr, pcErr, evErr, jitErr)
	if err == nil {
		err = chainInsertions(pc, ev, dl)
	}
	if err == nil {
		mach, err = machine.New(machine.Options{Traced: sc.Tracked().Has, LivePIDs: sc.LivePIDs})
	}
	s.adopt(pc, ev, mach, j, dl, ps)
	if err != nil {
		return err
	}
	if !s.opts.NoGPU {
		g, err := gpu.New(gpu.Options{Interval: s.opts.GPUInterval, Traced: sc.Tracked().Has})
		if err != nil {
			return err
		}
		s.sensors = inTableOrder(append(s.sensors, g))
	}
	return nil
}

// adopt puts the loaded sensors (not the nil ones) beside the
// scheduler, in the table's order (Sensors): the stack sensor finishes
// before the sensors that name stacks (its Finish decodes the last ones;
// theirs intern them), the uprobe links' owner is polled after the
// sensors whose events told it of processes and closed first (all links
// together).
func (s *session) adopt(pc *pagecache.Sensor, ev *evict.Sensor, mach *machine.Sensor, j *jit.Sensor, dl *download.Sensor, ps *pystack.Sensor) {
	loaded := append(s.sensors, s.uprobes)
	add := func(sn Sensor, ok bool) {
		if ok {
			loaded = append(loaded, sn)
		}
	}
	add(ps, ps != nil)
	add(pc, pc != nil)
	add(ev, ev != nil)
	add(mach, mach != nil)
	add(j, j != nil)
	add(dl, dl != nil)
	s.sensors = inTableOrder(loaded)
}

// pagecacheOptions are the page-cache sensor's: the scheduler's maps and
// ongoing waits, and the stack walker's maps when it is loaded.
func pagecacheOptions(shared map[string]*ebpf.Map, waiting func() (io, fill map[probe.FileKey]int64),
	fileSeen func(probe.FileSeen), kernel *btf.Cache, ps *pystack.Sensor) pagecache.Options {
	o := pagecache.Options{Shared: shared, Waiting: waiting, FileSeen: fileSeen, BTF: kernel}
	if ps != nil {
		o.Stacks, o.InternStack, o.StackPID = ps.Replacements(), ps.Intern, ps.PIDOf
	}
	return o
}

// loadJITAndNetwork loads the JIT sensor and the network sensor (which
// tells the JIT sensor of downloads, once jitSeen holds it) at once,
// unless the options turn them off (nil then), and makes the gated
// command's uprobe links, which are theirs. Sensors it returns with an
// error are the session's to close.
//
// The network and JIT probes take the stack walker's maps: they wait for
// walker to close, after which *ps holds the walker (nil without stacks).
func (s *session) loadJITAndNetwork(shared sched.Shared, kernel *btf.Cache, jitSeen *atomic.Pointer[jit.Sensor],
	walker <-chan struct{}, ps **pystack.Sensor) (*jit.Sensor, *download.Sensor, error) {
	var dl *download.Sensor
	var dlErr error
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		var onDownload func(int32)
		if !s.opts.NoJIT {
			// Downloads are seen at polls, once the command runs.
			onDownload = func(pid int32) {
				if js := jitSeen.Load(); js != nil {
					js.DownloadSeen(pid)
				}
			}
		}
		<-walker
		dl, dlErr = s.loadDownload(shared, kernel, onDownload, *ps)
	}()
	var j *jit.Sensor
	var jitErr error
	if !s.opts.NoJIT {
		jo := jit.Options{Shared: shared.Replacements(), Command: s.opts.Command, Env: s.opts.Env, CacheDirs: s.opts.CacheDirs,
			Uprobes: s.opts.JITUprobes, Syscalls: s.opts.JITSyscalls, Actor: s.opts.Actor.CommandActor(), BTF: kernel,
			Scoper: s.uprobes}
		// Its lookups and compile calls take stacks: the walker's maps
		// (made first, in a moment) are its too.
		<-walker
		if *ps != nil {
			jo.Stacks, jo.InternStack, jo.StackPID = (*ps).Replacements(), (*ps).Intern, (*ps).PIDOf
		}
		j, jitErr = jit.New(jo)
		if errors.Is(jitErr, jit.ErrOption) {
			jitErr = fmt.Errorf("%w: %v", ErrPreflight, jitErr)
		}
	}
	<-loaded
	if err := errors.Join(jitErr, dlErr); err != nil {
		return j, dl, err
	}
	s.trackGated()
	return j, dl, nil
}

// chainInsertions has the page cache's program on
// mm_filemap_add_to_page_cache run the eviction and network sensors'
// programs for that tracepoint: one program there, not three.
func chainInsertions(pc *pagecache.Sensor, ev *evict.Sensor, dl *download.Sensor) error {
	var untracked, tracked *ebpf.Program
	if ev != nil {
		untracked = ev.InsertProgram()
	}
	if dl != nil {
		tracked = dl.WriteProgram()
	}
	return pc.Chain(untracked, tracked)
}

// loadStacks makes the Python stack sensor's maps and loads its programs
// in a lane of wg's. A sensor that cannot load (a kernel without
// bpf_loop) costs the run its stacks, not the run: once wg is done,
// started returns the sensor, or nil (and releases it) if its programs
// failed to load.
func (s *session) loadStacks(shared sched.Shared, kernel *btf.Cache, wg *sync.WaitGroup) (ps *pystack.Sensor, started func() *pystack.Sensor) {
	notify := func(err error) {
		if s.opts.Notify != nil {
			s.opts.Notify("no Python stacks: " + err.Error())
		}
	}
	ps, err := pystack.Prepare(pystack.Options{TaskStates: shared.TaskStates, Threads: shared.Threads, BTF: kernel})
	if err != nil {
		notify(err)
		return nil, func() *pystack.Sensor { return nil }
	}
	var startErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		startErr = ps.Start()
	}()
	return ps, func() *pystack.Sensor {
		if startErr != nil {
			notify(startErr)
			ps.Close()
			return nil
		}
		return ps
	}
}

// loadDownload loads and attaches the network sensor, unless the options
// turn it off (nil then).
func (s *session) loadDownload(shared sched.Shared, kernel *btf.Cache, onDownload func(int32), ps *pystack.Sensor) (*download.Sensor, error) {
	if s.opts.NoNetwork {
		return nil, nil
	}
	ds := download.Options{TaskStates: shared.TaskStates, Threads: shared.Threads, Rights: s.opts.Actor.CommandActor(), BTF: kernel,
		OnDownload: onDownload, Uprobes: s.uprobes, Chained: true}
	if ps != nil {
		ds.Stacks, ds.InternStack, ds.StackPID = ps.Replacements(), ps.Intern, ps.PIDOf
	}
	dl, err := download.Prepare(ds)
	if err != nil {
		return nil, err
	}
	if err := dl.Start(); err != nil {
		dl.Close()
		return nil, err
	}
	return dl, nil
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

// close releases every sensor, the last loaded first.
func (s *session) close() {
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
