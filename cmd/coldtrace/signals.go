package main

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// catchSignals gives a tracing subcommand the signals a user or a job
// control sends (DESIGN.md, "Signals"). The channel stays installed until
// the process exits, on purpose: after signal.Stop a late SIGINT, SIGTERM
// or SIGHUP takes its default action, and one arriving between the
// outputs and exit killed coldtrace and replaced the command's exit code
// with 128+n. Once nothing reads the channel its buffer fills and the
// runtime drops the rest, which is what a signal after the command's exit
// deserves.
func catchSignals() <-chan os.Signal {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return sigs
}

// catchSIGPIPE keeps coldtrace alive when its stdout or stderr is a pipe
// whose reader has gone (`coldtrace ... 2>&1 | head`): without a handler
// the Go runtime dies of SIGPIPE at the first write there, losing the
// record of a command that runs on untraced. Caught, the write fails with
// EPIPE instead (see stopOnEPIPE). Notify, never signal.Ignore: an ignored
// SIGPIPE is inherited across exec, and the command must get the default
// disposition it would have without coldtrace; a caught one is reset to
// the default at exec. A SIGPIPE the process already ignores is left
// ignored. (The Go runtime installs its own handler over an inherited
// SIG_IGN for every signal but SIGHUP and SIGINT, so signal.Ignored sees
// only what this process ignored itself.)
func catchSIGPIPE() {
	if signal.Ignored(syscall.SIGPIPE) {
		return
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// quietPipe is a writer that stops printing once its reader has gone:
// the first EPIPE turns every later write into a no-op that succeeds, so
// a dead terminal pipe neither fails the run nor stops its outputs.
type quietPipe struct {
	w      io.Writer
	broken atomic.Bool
}

// stopOnEPIPE wraps stdout or stderr of a tracing subcommand.
func stopOnEPIPE(w io.Writer) io.Writer {
	return &quietPipe{w: w}
}

func (q *quietPipe) Write(p []byte) (int, error) {
	if q.broken.Load() {
		return len(p), nil
	}
	n, err := q.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		q.broken.Store(true)
		return len(p), nil
	}
	return n, err
}
