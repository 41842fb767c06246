package trace

import (
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
)

func exitCode(st *os.ProcessState) (int, string) {
	if st == nil {
		return 127, ""
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok {
		return st.ExitCode(), ""
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}

func commName(arg0 string) string {
	if i := strings.LastIndexByte(arg0, '/'); i >= 0 {
		arg0 = arg0[i+1:]
	}
	if len(arg0) > 15 {
		arg0 = arg0[:15]
	}
	return arg0
}

// inForeground reports whether coldtrace owns the terminal on stdin, so the
// command can be given it.
func inForeground() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil {
		return false // no terminal on stdin
	}
	return pgrp == unix.Getpgrp()
}

// reclaimTerminal takes the terminal back after the command's process
// group had it; SIGTTOU would otherwise stop coldtrace. A terminal gone
// meanwhile leaves nothing to take back.
func reclaimTerminal() {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
}

// hostInfo describes the machine; a field the kernel does not give stays
// empty.
func hostInfo() record.Host {
	h := record.Host{CPUs: runtime.NumCPU(), PageSize: os.Getpagesize()}
	h.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		h.MemBytes = uint64(si.Totalram) * uint64(si.Unit)
	}
	return h
}

func selfCost(s record.SelfCost) record.SelfCost {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		s.CPUNS = ru.Utime.Nano() + ru.Stime.Nano()
		s.MaxRSSBytes = uint64(ru.Maxrss) * 1024
	}
	return s
}
