package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/outfile"
	"github.com/coldtrace/coldtrace/registry"
)

// runOutputs are the outputs a run was asked for, by flag, in the order
// they are written; only flags given on the command line are here, so
// `--json ""` is an empty path (an error), not "no JSON".
func runOutputs(o runOptions) []outfile.Output {
	return givenOutputs(o.changed, o.recordPath, o.jsonPath, o.exports)
}

// givenOutputs are the output flags of run and attach that changed
// names, in the order they are written.
func givenOutputs(changed map[string]bool, recordPath, jsonPath string, ex exportOptions) []outfile.Output {
	var outs []outfile.Output
	for _, f := range []struct{ name, flag, path string }{
		{"output", "-o", recordPath}, {"pprof", "--pprof", ex.pprofPath},
		{"timeline", "--timeline", ex.timelinePath}, {"json", "--json", jsonPath},
	} {
		if changed[f.name] {
			outs = append(outs, outfile.Output{Flag: f.flag, Path: f.path})
		}
	}
	return outs
}

// checkRunOutputs refuses, before the run, every output that could not be
// written at its end (outfile.Check, with a's rights) and every output to
// stdout the command's own output would mix with.
func checkRunOutputs(a actor.Actor, outs []outfile.Output, stdout, commandStdout *os.File) error {
	for _, out := range outs {
		if out.Path != outfile.Stdout || stdout == nil {
			continue
		}
		shared, err := sameOpenFile(stdout, commandStdout)
		if err != nil {
			return fmt.Errorf("%s -: %w", out.Flag, err)
		}
		if shared {
			return fmt.Errorf("%s -: the command writes to the same stdout (%s), so the two would mix; "+
				"use %s PATH, or --json-fd N to write the JSON summary to an inherited descriptor (e.g. --json-fd 3 3>summary.json)",
				out.Flag, describeFile(stdout), out.Flag)
		}
		if err := binaryToTerminal(out.Flag, stdout); err != nil {
			return err
		}
	}
	return outfile.Check(a, outs...)
}

// binaryToTerminal refuses gzip and protobuf data on a terminal.
func binaryToTerminal(flag string, f *os.File) error {
	if (flag == "-o" || flag == "--pprof") && isTerminal(f) {
		return fmt.Errorf("%s -: the output is binary (gzip) and stdout is a terminal; redirect it to a file or a pipe", flag)
	}
	return nil
}

// sameOpenFile reports whether a and b are one file: one inode, which for
// a terminal or pipe is the same terminal or pipe.
func sameOpenFile(a, b *os.File) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(int(a.Fd()), &sa); err != nil {
		return false, fmt.Errorf("stat stdout: %w", err)
	}
	if err := unix.Fstat(int(b.Fd()), &sb); err != nil {
		return false, fmt.Errorf("stat the command's stdout: %w", err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

func describeFile(f *os.File) string {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "unknown"
	}
	switch {
	case isTerminal(f):
		return "a terminal"
	case st.Mode&unix.S_IFMT == unix.S_IFIFO:
		return "a pipe"
	case st.Mode&unix.S_IFMT == unix.S_IFSOCK:
		return "a socket"
	case st.Mode&unix.S_IFMT == unix.S_IFREG:
		return "a file"
	}
	return "a device"
}

// openJSONFD takes descriptor fd, inherited from coldtrace's parent, for
// the JSON summary. It must be open for writing and not stdin, stdout or
// stderr; it is marked close-on-exec so that the command does not inherit
// it.
func openJSONFD(fd int) (*os.File, error) {
	if fd <= 2 {
		return nil, fmt.Errorf("--json-fd %d: use a descriptor above 2 (for stdout, --json -)", fd)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, fmt.Errorf("--json-fd %d: not an open descriptor (open it in the shell, e.g. %d>summary.json): %w", fd, fd, err)
	}
	target, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if flags&unix.O_ACCMODE == unix.O_RDONLY {
		return nil, fmt.Errorf("--json-fd %d: open for reading only (%s)", fd, target)
	}
	// A descriptor the shell did not pass may be one the Go runtime made
	// for itself (epoll, eventfd, pidfd): those are anonymous inodes,
	// never a place for a summary.
	if strings.HasPrefix(target, "anon_inode:") {
		return nil, fmt.Errorf("--json-fd %d: not a file, pipe or socket inherited from the shell (%s)", fd, target)
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), fmt.Sprintf("fd %d", fd)), nil
}

// inputLookLimit bounds each look at an input path before the run.
const inputLookLimit = 3 * time.Second

// warnMissingInputs warns, before the run, about a --cache-dir or a
// --jit-uprobe library named by path that the command's user cannot see:
// the run would go on and find nothing there.
func warnMissingInputs(a actor.Actor, cacheDirs, uprobes []string, warn func(string)) {
	cwd, _ := os.Getwd()
	cmdActor := a.CommandActor()
	look := func(flag, p string) {
		// A path on a hung network file system must not hold the run.
		done := make(chan error, 1)
		go func() { done <- cmdActor.Do(func() error { _, err := os.Stat(p); return err }) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(inputLookLimit):
			err = fmt.Errorf("%s did not answer within %v", p, inputLookLimit)
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrNotExist):
			warn(fmt.Sprintf("%s: %s does not exist (yet)", flag, p))
		case errors.Is(err, os.ErrPermission) && a.Via != "":
			warn(fmt.Sprintf("%s: %s is not reachable by %s: %v", flag, p, a.Command.Name, err))
		default:
			warn(fmt.Sprintf("%s: %v", flag, err))
		}
	}
	for _, v := range cacheDirs {
		if _, dir, ok := registry.ParseCacheDir(v, cwd); ok {
			look("--cache-dir "+v, dir)
		}
	}
	for _, v := range uprobes {
		lib := v
		if i := strings.LastIndexByte(v, ':'); i > 0 {
			lib = v[:i]
		}
		if strings.Contains(lib, "/") {
			look("--jit-uprobe "+v, lib)
		}
	}
}

// writeStdoutOr writes to stdout for "-", else to the file path with a's
// rights.
func writeStdoutOr(a actor.Actor, path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == outfile.Stdout {
		return write(stdout)
	}
	return outfile.Write(a, path, write)
}
