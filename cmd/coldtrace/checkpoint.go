package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/checkpoint"
	"github.com/coldtrace/coldtrace/report/format"
)

// checkpointOptions are run's flags for surviving coldtrace's own death.
type checkpointOptions struct {
	every      time.Duration
	killOnExit bool
}

// addFlags registers --checkpoint on fs (run and attach).
func (c *checkpointOptions) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.every, "checkpoint", time.Minute,
		"write the record so far every `D` to -o PATH.partial (no -o: /var/tmp/coldtrace-USER/), so a killed coldtrace leaves one; 0 turns it off")
}

// addKillOnExitFlag registers --kill-on-exit on fs: run only, as only
// run starts the command it could kill.
func (c *checkpointOptions) addKillOnExitFlag(fs *pflag.FlagSet) {
	fs.BoolVar(&c.killOnExit, "kill-on-exit", false,
		"kill the command and everything it started if coldtrace dies first (default: the command runs on, untraced)")
}

// writer decides where the run's checkpoints go, creating the state
// directory when there is no -o, and returns the writer; nil when
// checkpoints are off. Checkpoints are on by default, so a state
// directory that cannot be used turns them off with a line on stderr
// rather than refusing the run.
func (c checkpointOptions) writer(a actor.Actor, recordPath string, launched time.Time, stderr io.Writer) *checkpoint.Writer {
	if c.every <= 0 {
		return nil
	}
	// Checkpoints are the invoking user's files, as the other outputs are.
	path, err := checkpoint.Path(a, checkpoint.Place{RecordPath: recordPath, PID: os.Getpid(), Start: launched})
	if err == nil {
		return checkpoint.NewWriter(a, path)
	}
	fmt.Fprintf(stderr, "coldtrace: no checkpoints for this run (%s); use -o PATH to keep them next to the record\n", errorText(err))
	return nil
}

// checkpointFunc is the trace session's checkpoint function; nil when off.
func checkpointFunc(w *checkpoint.Writer) func(*record.Record) error {
	if w == nil {
		return nil
	}
	return w.Write
}

// finishCheckpoints removes the checkpoint once the run's outputs are
// written; when they failed it stays, and the user is told where.
func finishCheckpoints(w *checkpoint.Writer, outputsFailed bool, stderr io.Writer) {
	if w == nil {
		return
	}
	if outputsFailed {
		if _, err := os.Stat(w.Path()); err == nil {
			fmt.Fprintf(stderr, "coldtrace: the last checkpoint is kept in %s\n", format.Escape(w.Path()))
		}
		return
	}
	if err := w.Remove(); err != nil {
		fmt.Fprintf(stderr, "coldtrace: error: %s\n", errorText(err))
	}
}
