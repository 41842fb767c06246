// Package checkpoint writes a run's record while the run goes on, so that
// coldtrace killed with SIGKILL (or the machine's OOM killer) leaves a
// readable record up to its last checkpoint.
//
// Where (docs/definitions.md, "State directory"): next to the -o path as
// PATH.partial; with no -o, under /var/tmp/coldtrace-<user>/, a directory
// of the invoking user's, mode 0700, where each run's file is named by
// its start time and coldtrace's pid so that concurrent runs never share
// one. Every checkpoint replaces the last atomically (internal/outfile:
// a temporary file, fsync, rename), with the invoking user's rights; a
// normal finish removes the file.
package checkpoint

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/record"
)

// Suffix ends every checkpoint file's name.
const Suffix = ".partial"

// DefaultStateRoot holds the per-user checkpoint directories of runs with
// no -o: it survives reboots on most systems, unlike /tmp.
const DefaultStateRoot = "/var/tmp"

// Place is where the checkpoints of a run go.
type Place struct {
	// RecordPath is the run's -o path; empty when none was given.
	RecordPath string
	// StateRoot holds coldtrace-<user>/ when RecordPath is empty
	// (DefaultStateRoot when empty).
	StateRoot string
	// PID and Start name the file under the state directory.
	PID   int
	Start time.Time
}

// Path decides the checkpoint file of p for the user a acts for, creating
// the state directory when needed. It refuses a state directory that is
// not a's own directory with no access for others: under the
// world-writable /var/tmp another user could have made it first.
func Path(a actor.Actor, p Place) (string, error) {
	if p.RecordPath != "" && p.RecordPath != outfile.Stdout {
		return p.RecordPath + Suffix, nil
	}
	root := p.StateRoot
	if root == "" {
		root = DefaultStateRoot
	}
	dir := filepath.Join(root, "coldtrace-"+userName(a))
	if err := a.Do(func() error { return ownDir(dir, a.UID) }); err != nil {
		return "", fmt.Errorf("checkpoint directory: %w", err)
	}
	name := fmt.Sprintf("run-%s-%d.record%s", p.Start.UTC().Format("20060102T150405Z"), p.PID, Suffix)
	return filepath.Join(dir, name), nil
}

// userName names the state directory: the user's name, or their uid when
// they have no passwd entry.
func userName(a actor.Actor) string {
	if a.Name != "" {
		return a.Name
	}
	return strconv.FormatUint(uint64(a.UID), 10)
}

// ownDir makes dir (0700) or checks that the one there is a directory of
// uid's that no one else may enter. It runs with the user's rights, so a
// new directory is theirs.
func ownDir(dir string, uid uint32) error {
	err := os.Mkdir(dir, 0o700)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory; remove it or use -o", dir)
	case st.Uid != uid:
		return fmt.Errorf("%s belongs to uid %d, not %d; remove it or use -o", dir, st.Uid, uid)
	case st.Mode&0o077 != 0:
		// Made by this user with a looser mode: close it.
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Writer writes the checkpoints of one run to one path.
type Writer struct {
	a    actor.Actor
	path string
}

// NewWriter writes checkpoints to path with a's rights.
func NewWriter(a actor.Actor, path string) *Writer {
	return &Writer{a: a, path: path}
}

// Path is the checkpoint file.
func (w *Writer) Path() string { return w.path }

// Write replaces the checkpoint file with rec, which must be partial: a
// complete record under a .partial name would lie.
func (w *Writer) Write(rec *record.Record) error {
	if rec.Partial == nil {
		return fmt.Errorf("checkpoint %s: the record is not marked partial", w.path)
	}
	if err := outfile.Write(w.a, w.path, func(out io.Writer) error { return record.EncodeLevel(out, rec, gzip.BestSpeed) }); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Remove deletes the checkpoint file once the run's outputs are written:
// this run's, or a stale one a killed earlier run left next to the same
// -o path, which the new record replaces. Nothing to remove is not an
// error.
func (w *Writer) Remove() error {
	err := w.a.Do(func() error { return os.Remove(w.path) })
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove checkpoint: %w", err)
	}
	return nil
}
