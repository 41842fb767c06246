//go:build linux && (386 || arm)

package actor

import "golang.org/x/sys/unix"

// The original id system calls take 16-bit ids on these architectures;
// the *32 ones take full ids.
const (
	sysSetfsuid  = unix.SYS_SETFSUID32
	sysSetfsgid  = unix.SYS_SETFSGID32
	sysSetgroups = unix.SYS_SETGROUPS32
	sysGetgroups = unix.SYS_GETGROUPS32
)
