package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// watchMode is argv[2] of the shim executable started as a watcher.
const watchMode = "--watch"

// Watch is a small process that outlives coldtrace and kills the
// command's process group, and every process descended from it, if
// coldtrace dies before the command ends (--kill-on-exit).
//
// Why a process and not PR_SET_PDEATHSIG in the shim: the parent-death
// signal reaches the command alone, not what it started, and it fires
// when the thread that forked the shim exits, which in Go may be any
// thread; the kernel also clears it when the shim changes its
// credentials. The watcher instead holds the read end of a pipe whose
// only write end is coldtrace's: coldtrace dead by any means (SIGKILL
// included) closes it, and EOF without the "done" byte means coldtrace
// did not finish the run.
type Watch struct {
	cmd  *exec.Cmd
	pipe *os.File
}

// StartWatch starts the watcher for the command whose process group is
// pgid (the shim's pid). It runs as coldtrace's user, in a process group
// of its own, ignoring the signals a Ctrl-C or pkill would send it.
func StartWatch(pgid int) (*Watch, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find coldtrace's own executable: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watcher pipe: %w", err)
	}
	cmd := exec.Command(self, ShimArg, watchMode, strconv.Itoa(pgid))
	cmd.Args[0] = "coldtrace-watch"
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the watcher: %w", err)
	}
	return &Watch{cmd: cmd, pipe: w}, nil
}

// Done tells the watcher that the command ended and coldtrace finishes
// normally, and reaps it. It is safe to call more than once.
func (w *Watch) Done() error {
	if w == nil || w.pipe == nil {
		return nil
	}
	_, err := w.pipe.Write([]byte{1})
	w.pipe.Close()
	w.pipe = nil
	if werr := w.cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("watcher: %w", werr)
	}
	return err
}

// Pid is the watcher's pid.
func (w *Watch) Pid() int { return w.cmd.Process.Pid }

// runWatch is the watcher's body; it never returns.
func runWatch() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP)
	pgid, err := strconv.Atoi(os.Args[3])
	if err != nil || pgid <= 1 {
		fmt.Fprintf(os.Stderr, "coldtrace watcher: bad process group %q\n", os.Args[3])
		os.Exit(2)
	}
	pipe := os.NewFile(3, "coldtrace")
	var b [1]byte
	n, _ := pipe.Read(b[:])
	if n == 1 {
		os.Exit(0) // coldtrace finished the run
	}
	killed := killTree(pgid)
	fmt.Fprintf(os.Stderr, "coldtrace: coldtrace ended before the command (--kill-on-exit): killed %d processes of process group %d and their descendants\n",
		killed, pgid)
	os.Exit(0)
}

// killTree sends SIGKILL to every process in group pgid and every
// descendant of one, until none is left (a fork racing a round is caught
// by the next). It returns how many processes it killed.
func killTree(pgid int) int {
	killed := map[int]bool{}
	for round := 0; round < 20; round++ {
		procs := readProcs()
		victims := map[int]bool{}
		for pid, p := range procs {
			if p.pgrp == pgid {
				victims[pid] = true
			}
		}
		// Descendants that left the group (setsid, setpgid) are found
		// through their parents.
		for grew := true; grew; {
			grew = false
			for pid, p := range procs {
				if !victims[pid] && victims[p.ppid] {
					victims[pid] = true
					grew = true
				}
			}
		}
		if len(victims) == 0 {
			break
		}
		for pid := range victims {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed[pid] = true
			}
		}
		// A killed process's zombie stays until its parent reaps it;
		// only live ones count for the next round.
		if !anyAlive(victims) {
			break
		}
	}
	return len(killed)
}

type procInfo struct{ ppid, pgrp int }

// readProcs reads ppid and pgrp of every process from /proc/PID/stat.
func readProcs() map[int]procInfo {
	out := map[int]procInfo{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, state, ok := readStat(pid); ok && state != "Z" && state != "X" {
			out[pid] = p
		}
	}
	return out
}

// readStat parses /proc/PID/stat; the command name may hold spaces and
// parentheses, so the fields are counted from its last ')'.
func readStat(pid int) (procInfo, string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procInfo{}, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return procInfo{}, "", false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil {
		return procInfo{}, "", false
	}
	return procInfo{ppid: ppid, pgrp: pgrp}, f[0], true
}

func anyAlive(pids map[int]bool) bool {
	for pid := range pids {
		if _, state, ok := readStat(pid); ok && state != "Z" && state != "X" {
			return true
		}
	}
	return false
}
