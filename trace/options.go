package trace

import (
	"os"
	"time"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/jit"
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
	User     string        // --user; empty means the sudo user or coldtrace's own
	// Getenv reads coldtrace's environment for the sudo variables
	// (os.Getenv when nil).
	Getenv func(string) string
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
	// OnSample, when set, sees each sample as it is taken (live progress).
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
	// CacheDirs are extra kernel-cache directories, "NAME=PATH".
	CacheDirs []string
	// JITUprobes are extra compile entry points, "LIB:SYMBOL".
	JITUprobes []string
	// JITSyscalls is when the path-syscall probes attach: JITSyscallsAuto
	// (the default: once a process uses a framework with a kernel cache,
	// or from the start when the command is one) or JITSyscallsAlways.
	JITSyscalls string
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
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
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	return o
}
