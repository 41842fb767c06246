// Package uprobes installs coldtrace's uprobes in traced processes only.
//
// A uprobe sits on a file's inode: unfiltered, every process on the
// machine that maps the library traps on it. Here each traced process
// gets its own links, filtered by its pid: one uprobe_multi link per
// (process, library file, program) where the kernel has them (6.6+),
// otherwise perf-event uprobes with the pid for at most MaxPerfProcesses
// processes. A library file is only ever opened through a traced
// process's own mapping (/proc/PID/map_files, checked by device and
// inode) or, for the few files known before the run, by the caller; its
// symbols are read from that descriptor, and the probes attach through
// /proc/self/fd/N. A path a process named is never opened or stat'ed.
package uprobes

import (
	"path"
	"strings"
)

// Target is one function to probe in every library file that matches
// Lib, in every traced process that maps it.
type Target struct {
	// Name is how the record names the probe ("LIB:SYMBOL").
	Name string
	// Lib is a library name ("libcuda", "libc.so.6") or a path, of which
	// only the base name is matched.
	Lib    string
	Symbol string
	// Cookie is what the programs read with bpf_get_attach_cookie.
	Cookie uint64
}

// Matches says whether a library file, by its base name, is t's.
func (t Target) Matches(base string) bool {
	lib := t.Lib
	base = strings.TrimSuffix(base, " (deleted)")
	if strings.Contains(lib, "/") {
		return base == path.Base(lib)
	}
	if base == lib || strings.HasPrefix(base, lib+".") {
		return true
	}
	// "nvrtc" matches libnvrtc.so.12 and the wheels' libnvrtc-<hash>.so.12.
	stem := strings.TrimPrefix(strings.TrimSuffix(lib, ".so"), "lib")
	return strings.HasPrefix(base, "lib"+stem+".so") || strings.HasPrefix(base, "lib"+stem+"-")
}

// TargetState is what became of one target.
type TargetState struct {
	// Path is the first library file it was attached in, as the first
	// process that mapped it listed it (for display only).
	Path string
	// Error is its first failure, "" when none.
	Error string
	// Processes counts the traced processes it was attached in.
	Processes int
	// Unprobed counts the traced processes its set's gate kept it out
	// of: none of their objects could call it.
	Unprobed int
}
