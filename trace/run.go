package trace

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
)

// Options configure one traced run.
type Options struct {
	Command  []string
	Interval time.Duration // polling period; 100 ms when zero
	User     string        // --user; empty means the sudo user or coldtrace's own
	// Launched is when coldtrace started, so the startup cost covers
	// flag parsing and probe loading too.
	Launched time.Time
	Stdin    *os.File
	Stdout   *os.File
	Stderr   *os.File
	// Notify is told about coldtrace's own decisions (a signal forwarded,
	// a kill), one line each.
	Notify  func(string)
	Version string
	// OnStart, when set, is called once the command has been released,
	// with its pid; tests use it to send signals.
	OnStart func(pid int)
	// OnSample, when set, sees each sample as it is taken (live progress).
	OnSample func(s record.Sample)

	// NoGPU skips NVML sampling; GPUInterval is its period (100 ms when
	// zero).
	NoGPU       bool
	GPUInterval time.Duration
	// CacheDirs are extra kernel-cache directories, "NAME=PATH".
	CacheDirs []string
	// JITUprobes are extra compile entry points, "LIB:SYMBOL".
	JITUprobes []string
	// JITSyscalls is when the path-syscall probes attach: JITSyscallsAuto
	// (the default: once a process uses a framework with a kernel cache,
	// or from the start when the command is one) or JITSyscallsAlways.
	JITSyscalls string
}

// Run traces opts.Command to its end and returns the record. The error is
// non-nil only when tracing itself failed; a command that fails or cannot
// be started still yields a record with its exit code.
func Run(ctx context.Context, opts Options) (*record.Record, error) {
	if len(opts.Command) == 0 {
		return nil, fmt.Errorf("%w: no command given", ErrPreflight)
	}
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.Launched.IsZero() {
		opts.Launched = time.Now()
	}
	if opts.Stdin == nil {
		opts.Stdin, opts.Stdout, opts.Stderr = os.Stdin, os.Stdout, os.Stderr
	}
	notify := opts.Notify
	if notify == nil {
		notify = func(string) {}
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if err := Preflight(); err != nil {
		return nil, err
	}
	id, err := ResolveIdentity(opts.User, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPreflight, err)
	}
	p, err := loadProbes()
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if err := p.attach(); err != nil {
		return nil, err
	}
	mounts, err := readMountTable("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}

	tracked := newPidSet()
	var startMono atomic.Uint64
	env := &runEnv{ctx: ctx, threads: p.objs.Threads, taskStates: p.objs.TaskStates, startMono: startMono.Load, tracked: tracked, opts: &opts}
	var sources []evidence
	if !opts.NoGPU {
		sources = append(sources, &gpuEvidence{})
	}
	jitSrc := &jitEvidence{}
	sources = append(sources, jitSrc)
	for _, src := range sources {
		defer src.close()
		if err := src.start(env); err != nil {
			return nil, err
		}
	}

	foreground := inForeground()
	child, err := startGated(opts.Command, id, opts.Stdin, opts.Stdout, opts.Stderr, foreground)
	if err != nil {
		return nil, err
	}
	if foreground {
		defer reclaimTerminal()
	}
	pid := child.cmd.Process.Pid
	tracked.add(int32(pid))
	if err := p.seed(pid, monotonicNS()); err != nil {
		child.abort()
		return nil, err
	}
	select {
	case s := <-sigs:
		child.abort()
		return nil, fmt.Errorf("interrupted by %v before the command started", s)
	default:
	}

	c := newCollector(p, mounts)
	c.tracked = tracked
	c.fileSeen = jitSrc.fileSeen
	rec := &record.Record{Schema: record.Schema, Version: opts.Version, Command: opts.Command,
		User: id.User, Host: hostInfo(), IntervalNS: opts.Interval.Nanoseconds()}
	if !id.Switch {
		rec.User.UID, rec.User.GID = uint32(os.Getuid()), uint32(os.Getgid())
	}

	c.startMono = monotonicNS()
	startMono.Store(c.startMono)
	rec.Start = time.Now()
	rec.StartupNS = time.Since(opts.Launched).Nanoseconds()
	c.proc(int32(pid)).comm = commName(opts.Command[0])
	if err := child.release(); err != nil {
		rec.StartError = err.Error()
	}
	if opts.OnStart != nil && rec.StartError == "" {
		opts.OnStart(pid)
	}

	raw := make(chan []byte, 4096)
	go readEvents(p.events, 50*time.Millisecond, raw)
	waited := make(chan *os.ProcessState, 1)
	go func() {
		_ = child.cmd.Wait()
		waited <- child.cmd.ProcessState
	}()

	ticker := time.NewTicker(opts.Interval)
	defer ticker.Stop()
	var state *os.ProcessState
	signalsSeen := 0
	var pollErr error
loop:
	for {
		select {
		case b, ok := <-raw:
			if ok {
				c.handleEvent(b)
			} else {
				raw = nil
			}
		case <-ticker.C:
			if err := c.poll(monotonicNS()); err != nil && pollErr == nil {
				pollErr = err
			}
			if opts.OnSample != nil && len(c.samples) > 0 {
				opts.OnSample(c.samples[len(c.samples)-1])
			}
		case s := <-sigs:
			rec.Interrupted = true
			signalsSeen++
			if signalsSeen >= 3 {
				notify(fmt.Sprintf("%v received %d times: killing the command", s, signalsSeen))
				_ = child.cmd.Process.Kill()
			} else {
				notify(fmt.Sprintf("%v: passing it to the command (pid %d); the report follows when it exits", s, pid))
				_ = child.cmd.Process.Signal(s)
			}
		case <-ctx.Done():
			rec.Interrupted = true
			_ = child.cmd.Process.Signal(syscall.SIGTERM)
			ctx = context.Background()
		case state = <-waited:
			break loop
		}
	}
	end := monotonicNS()
	rec.WallNS = int64(end - c.startMono)
	if err := c.poll(end); err != nil && pollErr == nil {
		pollErr = err
	}
	// Drain what the kernel already queued (the exit events above all).
	_ = p.events.Flush()
	if raw != nil {
		for b := range raw {
			c.handleEvent(b)
		}
	}

	rec.ExitCode, rec.Signal = exitCode(state)
	if rec.StartError != "" {
		rec.ExitCode = 127
	}
	if root := c.procs[int32(pid)]; root != nil {
		root.exited, root.end, root.exitCode = true, rec.WallNS, rec.ExitCode
	}
	c.fill(rec, os.Getpagesize())
	if pollErr != nil {
		rec.Warnings = append(rec.Warnings, pollErr.Error())
	}
	for _, src := range sources {
		src.finish(rec)
	}
	rec.Self = selfCost(rec.Self)
	return rec, nil
}

func exitCode(st *os.ProcessState) (int, string) {
	if st == nil {
		return 127, ""
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok {
		return st.ExitCode(), ""
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}

func commName(arg0 string) string {
	if i := strings.LastIndexByte(arg0, '/'); i >= 0 {
		arg0 = arg0[i+1:]
	}
	if len(arg0) > 15 {
		arg0 = arg0[:15]
	}
	return arg0
}

// inForeground reports whether coldtrace owns the terminal on stdin, so the
// command can be given it.
func inForeground() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil {
		return false
	}
	return pgrp == unix.Getpgrp()
}

// reclaimTerminal takes the terminal back after the command's process
// group had it; SIGTTOU would otherwise stop coldtrace.
func reclaimTerminal() {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
}

func hostInfo() record.Host {
	h := record.Host{CPUs: runtime.NumCPU(), PageSize: os.Getpagesize()}
	h.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		h.MemBytes = uint64(si.Totalram) * uint64(si.Unit)
	}
	return h
}

func selfCost(s record.SelfCost) record.SelfCost {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		s.CPUNS = ru.Utime.Nano() + ru.Stime.Nano()
		s.MaxRSSBytes = uint64(ru.Maxrss) * 1024
	}
	return s
}
