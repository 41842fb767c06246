package target

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pfKthread is PF_KTHREAD in /proc/PID/stat's flags field.
const pfKthread = 0x00200000

// ErrNoProcess is returned for a pid with no process (never was, or
// exited).
var ErrNoProcess = errors.New("no such process")

// ErrKernelThread is returned for a kernel thread: it runs no program of
// its own to trace.
var ErrKernelThread = errors.New("is a kernel thread")

// ErrNotCgroup is returned for a directory that is not in a cgroup file
// system.
var ErrNotCgroup = errors.New("not a cgroup directory")

// Proc is one process as /proc shows it.
type Proc struct {
	PID  int
	Comm string
	Exe  string
	Args []string
	// TIDs are its threads at the time of the look.
	TIDs []int
}

// Root is procfs's mount point; tests may not change it, it is a
// constant so /proc paths read alike everywhere.
const Root = "/proc"

// Look reads process pid: its name, program, arguments and threads. A pid
// that does not exist, or is a kernel thread, is an error saying so.
func Look(pid int) (Proc, error) {
	dir := filepath.Join(Root, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return Proc{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return Proc{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	comm, state, flags, err := parseStat(string(stat))
	if err != nil {
		return Proc{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	if state == "Z" || state == "X" {
		return Proc{}, fmt.Errorf("pid %d (%s): %w: it exited (its parent has not collected it yet)", pid, comm, ErrNoProcess)
	}
	if flags&pfKthread != 0 {
		return Proc{}, fmt.Errorf("pid %d (%s) %w", pid, comm, ErrKernelThread)
	}
	// A tid is a pid too (/proc/TID exists): only a thread group leader
	// is a process to attach to.
	if tgid, err := statusField(dir, "Tgid:"); err == nil && tgid != strconv.Itoa(pid) {
		return Proc{}, fmt.Errorf("pid %d is a thread of process %s: give the process", pid, tgid)
	}
	p := Proc{PID: pid, Comm: comm}
	p.Exe, _ = os.Readlink(filepath.Join(dir, "exe")) // gone for a zombie
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && len(b) > 0 {
		p.Args = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	if p.TIDs, err = Threads(pid); err != nil {
		return Proc{}, err
	}
	if len(p.TIDs) == 0 {
		return Proc{}, fmt.Errorf("pid %d: %w (it exited)", pid, ErrNoProcess)
	}
	return p, nil
}

// Threads lists the thread ids of process pid.
func Threads(pid int) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(Root, strconv.Itoa(pid), "task"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return nil, fmt.Errorf("pid %d: threads: %w", pid, err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	sort.Ints(tids)
	return tids, nil
}

// parseStat returns comm, state and flags from a /proc/PID/stat line. comm is in
// parentheses and may hold spaces and parentheses itself: the fields
// start after the last ')'.
func parseStat(s string) (comm, state string, flags uint64, err error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", "", 0, fmt.Errorf("stat line %q", s)
	}
	fields := strings.Fields(s[end+1:])
	// state ppid pgrp session tty_nr tpgid flags
	if len(fields) < 7 {
		return "", "", 0, fmt.Errorf("stat line %q", s)
	}
	flags, err = strconv.ParseUint(fields[6], 10, 64)
	if err != nil {
		return "", "", 0, fmt.Errorf("stat flags %q: %w", fields[6], err)
	}
	return s[open+1 : end], fields[0], flags, nil
}

func statusField(dir, key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no %s in status", key)
}

// CheckCgroup fails unless dir is a directory of a cgroup (v1 or v2)
// file system.
func CheckCgroup(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("%s: %w (it is on a file system of type %#x; cgroups live under /sys/fs/cgroup)", dir, ErrNotCgroup, st.Type)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		return fmt.Errorf("%s: %w (no cgroup.procs)", dir, ErrNotCgroup)
	}
	return nil
}

// CgroupPIDs are the processes in cgroup dir and the cgroups below it.
func CgroupPIDs(dir string) ([]int, error) {
	seen := map[int]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != dir {
				return nil // a child cgroup removed during the walk
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != dir {
				return nil
			}
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				seen[pid] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids, nil
}

// HostPath is the host's path for p as process pid sees it: the same
// path when pid shares coldtrace's mount namespace, else p under
// /proc/PID/root. ok is false when the namespaces differ.
func HostPath(pid int, p string) (host string, differs bool) {
	mine, err1 := os.Readlink("/proc/self/ns/mnt")
	theirs, err2 := os.Readlink(filepath.Join(Root, strconv.Itoa(pid), "ns", "mnt"))
	if err1 != nil || err2 != nil || mine == theirs {
		return p, false
	}
	return filepath.Join(Root, strconv.Itoa(pid), "root", p), true
}
