// Package abrun runs the traced runs of `coldtrace bench`: an optional
// prepare command, then one command under trace.Run in this process, its
// output captured and hashed, its system time from the kernel's
// accounting of reaped children, the peak RSS of its process tree, and
// what other processes did meanwhile. A side is made cold as `run --cold`
// makes a run cold (residency/coldrun), from the files the previous runs
// read from disk. The judgement and the report's types are
// attribution/abtest's.
package abrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/abtest"
	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace"
)

// keepOutput is how much of each stream is kept in memory for --expect
// and --show-output; the hash covers all of stdout.
const keepOutput = 8 << 20

// Options configure a Runner.
type Options struct {
	Version string
	// Actor is who coldtrace acts for: prepare commands run as its
	// command user, evictions and cache directories use its rights.
	Actor actor.Actor
	// Signals go to the traced command (trace.Options.Signals).
	Signals <-chan os.Signal
	Notify  func(string)
	NoGPU   bool
	// NoJIT and NoNetwork turn the JIT and network sensors off (bench
	// --no-jit, --no-network).
	NoJIT     bool
	NoNetwork bool
	// RSSEvery and ScanEvery are the sampling periods of the tree's RSS
	// (100 ms when zero) and of other processes' CPU and I/O (1 s).
	RSSEvery  time.Duration
	ScanEvery time.Duration
	// ProcRoot is /proc unless a test says otherwise.
	ProcRoot string
}

// Runner runs commands one after the other.
type Runner struct {
	opts Options
	// signals relays opts.Signals, counting them in seen, so a signal
	// that ends a run, or stops tracing before the command started, is
	// known to the bench. stop ends the relay.
	signals chan os.Signal
	seen    atomic.Int64
	stop    chan struct{}
	relayed sync.WaitGroup
}

// New returns a Runner.
func New(opts Options) *Runner {
	if opts.RSSEvery <= 0 {
		opts.RSSEvery = 100 * time.Millisecond
	}
	if opts.ScanEvery <= 0 {
		opts.ScanEvery = time.Second
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Notify == nil {
		opts.Notify = func(string) {}
	}
	r := &Runner{opts: opts, signals: make(chan os.Signal, 8), stop: make(chan struct{})}
	if opts.Signals != nil {
		r.relayed.Add(1)
		go r.relay()
	}
	return r
}

func (r *Runner) relay() {
	defer r.relayed.Done()
	for {
		select {
		case <-r.stop:
			return
		case sig := <-r.opts.Signals:
			r.seen.Add(1)
			select {
			case r.signals <- sig:
			default: // trace counts repeated signals itself; a full buffer loses nothing it needs
			}
		}
	}
}

// Close ends the signal relay.
func (r *Runner) Close() {
	close(r.stop)
	r.relayed.Wait()
}

// Signals counts the signals received so far.
func (r *Runner) Signals() int64 { return r.seen.Load() }

// Run traces argv once. env, when not empty, is VAR=value settings for
// the command alone: it runs under env(1), which execs it, so the traced
// tree is the same. The error is about tracing; the command's failure is
// in ExitCode.
func (r *Runner) Run(ctx context.Context, argv, env []string) (*abtest.Result, error) {
	stdout, err := scratch("stdout")
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := scratch("stderr")
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	command := argv
	var cmdEnv []string
	if len(env) > 0 {
		cmdEnv = overrideEnv(os.Environ(), env)
	}

	mon := newMonitor(r.opts.ProcRoot, r.opts.RSSEvery, r.opts.ScanEvery)
	before, err := childUsage()
	if err != nil {
		return nil, err
	}
	mon.start()
	rec, err := trace.Run(ctx, trace.Options{
		Command:   command,
		Actor:     r.opts.Actor,
		Env:       cmdEnv,
		Launched:  time.Now(),
		Version:   r.opts.Version,
		Stdin:     os.Stdin,
		Stdout:    stdout,
		Stderr:    stderr,
		Signals:   r.signals,
		Notify:    r.opts.Notify,
		NoGPU:     r.opts.NoGPU,
		NoJIT:     r.opts.NoJIT,
		NoNetwork: r.opts.NoNetwork,
		OnStart:   mon.released,
	})
	if err != nil {
		mon.finish(nil)
		return nil, err
	}
	after, err := childUsage()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range rec.Processes {
		pids = append(pids, int(p.PID))
	}
	res := &abtest.Result{
		Record:       rec,
		Analysis:     attribution.Analyze(rec),
		WallNS:       rec.WallNS,
		UserNS:       after.Utime.Nano() - before.Utime.Nano(),
		SysNS:        after.Stime.Nano() - before.Stime.Nano(),
		ExitCode:     rec.ExitCode,
		Interference: mon.finish(pids),
	}
	res.PeakRSSBytes = mon.peakRSS
	res.Categories = map[attribution.Category]int64{}
	for _, row := range res.Analysis.Breakdown {
		for i, c := range attribution.Categories {
			if c == row.Category {
				res.Split[i] = row.NS
				res.Categories[c] = row.NS
			}
		}
	}
	for _, g := range rec.GPU.Summaries() {
		res.VRAMPeakBytes += g.RunVRAMPeakBytes
	}
	res.Interference.GPUOthers = gpuOthers(rec.GPU)
	if res.StdoutSHA256, res.StdoutBytes, res.Stdout, err = digest(stdout); err != nil {
		return nil, err
	}
	if _, _, res.Stderr, err = digest(stderr); err != nil {
		return nil, err
	}
	return res, nil
}

// gpuOthers lists the untraced GPU processes NVML saw during the run,
// their mean SM utilisation as a fraction of the GPU in CPUs' place.
func gpuOthers(g *record.GPU) []abtest.Busy {
	if g == nil {
		return nil
	}
	var out []abtest.Busy
	for _, p := range g.Interference {
		out = append(out, abtest.Busy{PID: int(p.PID), Comm: p.Name, CPUs: p.SMUtilMeanPct / 100})
	}
	return out
}

// Prepare runs argv untraced as the command's user, its output captured;
// a non-zero exit is an error that quotes the end of its output.
func (r *Runner) Prepare(ctx context.Context, argv []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	a := r.opts.Actor
	if a.SwitchCommand {
		groups := make([]uint32, 0, len(a.Command.Groups))
		for _, g := range a.Command.Groups {
			groups = append(groups, uint32(g))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: a.Command.UID, Gid: a.Command.GID, Groups: groups}}
		cmd.Env = withUser(cmd.Env, a.Command)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := strings.TrimSpace(string(out))
		if len(tail) > 400 {
			tail = "…" + tail[len(tail)-400:]
		}
		if tail != "" {
			return out, fmt.Errorf("prepare %q: %w: %s", strings.Join(argv, " "), err, tail)
		}
		return out, fmt.Errorf("prepare %q: %w", strings.Join(argv, " "), err)
	}
	return out, nil
}

// withUser sets HOME, USER and LOGNAME to u's, as the traced command gets.
func withUser(env []string, u actor.User) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "HOME" && k != "USER" && k != "LOGNAME" {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
}

// scratch is an unlinked temporary file for a captured stream: the
// command writes through the inherited descriptor, whoever it runs as.
func scratch(name string) (*os.File, error) {
	f, err := os.CreateTemp("", "coldtrace-bench-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("capture the command's %s: %w", name, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("capture the command's %s: %w", name, err)
	}
	return f, nil
}

// digest hashes f from its start and keeps its first keepOutput bytes.
func digest(f *os.File) (string, int64, []byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, nil, fmt.Errorf("read captured output: %w", err)
	}
	h := sha256.New()
	var kept strings.Builder
	n, err := io.Copy(io.MultiWriter(h, &limited{w: &kept, left: keepOutput}), f)
	if err != nil {
		return "", 0, nil, fmt.Errorf("read captured output: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, []byte(kept.String()), nil
}

// limited writes the first left bytes to w and drops the rest.
type limited struct {
	w    io.Writer
	left int64
}

func (l *limited) Write(p []byte) (int, error) {
	if l.left > 0 {
		k := min(int64(len(p)), l.left)
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
		l.left -= k
	}
	return len(p), nil
}

// childUsage is the kernel's account of this process's reaped children:
// the difference around one run is the command's own user and system time
// (trace reaps it; nothing else of ours exits meanwhile).
func childUsage() (unix.Rusage, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return ru, fmt.Errorf("getrusage: %w", err)
	}
	return ru, nil
}

// overrideEnv returns base with each NAME=VALUE of over replacing base's
// NAME, so the command sees over's value whichever entry its libc reads.
func overrideEnv(base, over []string) []string {
	set := make(map[string]bool, len(over))
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}
