package trace

import (
	"os"
	"time"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/marks"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/jit"
	"github.com/coldtrace/coldtrace/trace/samples"
)

// When the path-syscall probes attach (Options.JITSyscalls).
const (
	JITSyscallsAuto   = jit.SyscallsAuto
	JITSyscallsAlways = jit.SyscallsAlways
)

// Options configure one traced run. Everything the run depends on is
// here: the package reads no environment variable of its own.
type Options struct {
	Command  []string
	Interval time.Duration // polling period; 100 ms when zero
	// Timeline bounds the samples held (trace/samples); the zero value
	// is samples.DefaultLimits().
	Timeline samples.Limits
	// Actor is for whom coldtrace works (internal/actor): the command
	// runs as Actor.Command, and what the command names (its program, its
	// cache trees) is read with the command's rights. Required: the zero
	// Actor is refused, never taken for root.
	Actor actor.Actor
	// Env is the command's environment before its user's HOME, USER and
	// LOGNAME are set (os.Environ() when nil).
	Env []string
	// Launched is when coldtrace started, so the startup cost covers
	// flag parsing and probe loading too.
	Launched time.Time
	Stdin    *os.File
	Stdout   *os.File
	Stderr   *os.File
	// Signals are the signals cmd received (signal.Notify): the first and
	// second are forwarded to the command's process group, the third
	// kills every tracked process. Nil: none.
	Signals <-chan os.Signal
	// Notify is told about coldtrace's own decisions (a signal forwarded,
	// a kill), one line each.
	Notify  func(string)
	Version string
	// OnStart, when set, is called once the command has been released,
	// with its pid; tests use it to send signals.
	OnStart func(pid int)
	// Loaded, when set, is called once every sensor is loaded, before
	// the command is released: the start's allocations (the kernel's
	// BTF, the objects' specs) are behind it.
	Loaded func()
	// OnSample, when set, sees each poll's sample as it is taken (live
	// progress), the final poll's included: the record's samples are
	// their sums (coarsened in a long run).
	OnSample func(s record.Sample)

	// NoGPU skips NVML sampling; GPUInterval is its period (100 ms when
	// zero).
	NoGPU       bool
	GPUInterval time.Duration
	// NoJIT skips the JIT and kernel-cache sensor (for overhead
	// measurements).
	NoJIT bool
	// NoNetwork skips the network sensor (downloads).
	NoNetwork bool
	// NoStacks skips the Python stack sensor (trace/pystack).
	NoStacks bool
	// NoReadExits keeps the read syscalls' exit tracepoints off on
	// kernels that refuse task works to tracing programs
	// (pagecache.Options.NoReadExits).
	NoReadExits bool
	// CacheDirs are extra kernel-cache directories, "NAME=PATH".
	CacheDirs []string
	// JITUprobes are extra compile entry points, "LIB:SYMBOL".
	JITUprobes []string
	// JITSyscalls is when the path-syscall probes attach: JITSyscallsAuto
	// (the default: once a process uses a framework with a kernel cache,
	// or from the start when the command is one) or JITSyscallsAlways.
	JITSyscalls string

	// Checkpoint, when set, is given a record of the run so far, marked
	// partial, every CheckpointEvery (never when zero), from a goroutine
	// of its own, one call at a time.
	Checkpoint      func(*record.Record) error
	CheckpointEvery time.Duration
	// Marks deliver mark labels (coldtrace mark, COLDTRACE_MARK) as they
	// arrive; each is recorded at its arrival. Nil: none.
	Marks <-chan marks.Mark

	// KillOnExit kills the command and its process group when coldtrace
	// dies before the command ends (launch.StartWatch); by default the
	// command runs on, untraced.
	KillOnExit bool
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.Timeline == (samples.Limits{}) {
		o.Timeline = samples.DefaultLimits()
	}
	if o.Launched.IsZero() {
		o.Launched = time.Now()
	}
	if o.Stdin == nil {
		o.Stdin, o.Stdout, o.Stderr = os.Stdin, os.Stdout, os.Stderr
	}
	if o.Notify == nil {
		o.Notify = func(string) {}
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	return o
}
