//go:build linux && !(386 || arm)

package actor

import "golang.org/x/sys/unix"

// The id system calls take 32-bit ids here.
const (
	sysSetfsuid  = unix.SYS_SETFSUID
	sysSetfsgid  = unix.SYS_SETFSGID
	sysSetgroups = unix.SYS_SETGROUPS
	sysGetgroups = unix.SYS_GETGROUPS
)
