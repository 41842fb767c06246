package jit

// PathSyscall is a syscall whose syscalls:sys_enter_NAME and
// sys_exit_NAME tracepoints the sensor attaches (enter with the program
// that reads Args arguments, on_path_enterN; exit with on_path_exit).
// Without a Required one the path probes do not run; the others only
// leave their calls unseen.
type PathSyscall struct {
	Name     string
	Args     int
	Required bool
}

// PathSyscalls lists them, for `coldtrace doctor`.
func PathSyscalls() []PathSyscall {
	out := make([]PathSyscall, 0, len(jitSyscalls))
	for _, sc := range jitSyscalls {
		out = append(out, PathSyscall{Name: sc.name, Args: sc.nargs, Required: sc.name == "openat"})
	}
	return out
}
