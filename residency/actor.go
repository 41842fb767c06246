package residency

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Actor runs file work with the rights of the user coldtrace acts for.
// fn must do its work on the calling goroutine: an implementation may
// change the credentials of the OS thread that goroutine is locked to.
type Actor interface {
	Do(fn func() error) error
}

// Self acts with coldtrace's own rights: a real root login, or coldtrace
// run without sudo.
type Self struct{}

// Do runs fn as is.
func (Self) Do(fn func() error) error { return fn() }

// Creds acts as another user by giving one OS thread that user's
// filesystem identity (fsuid, fsgid, supplementary groups). Changing the
// fsuid away from 0 also clears the thread's filesystem capabilities
// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER…), so opens,
// directory walks, cachestat's ownership check and /proc/PID/maps access
// see exactly the user's rights. It needs CAP_SETUID and CAP_SETGID.
type Creds struct {
	UID    uint32
	GID    uint32
	Groups []uint32
}

// Do runs fn on a fresh OS thread with c's filesystem identity. The
// thread is never handed back to the Go scheduler: its goroutine exits
// still locked, so the runtime ends the thread and its changed
// credentials can never serve another goroutine.
func (c Creds) Do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := c.assume(); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	return <-done
}

// assume switches the calling thread. The raw syscalls act on this thread
// only (the syscall package's setuid family would change every thread).
func (c Creds) assume() error {
	gids := make([]int, len(c.Groups))
	for i, g := range c.Groups {
		gids[i] = int(g)
	}
	// unix.Setgroups is a raw setgroups(2): this thread only.
	if err := unix.Setgroups(gids); err != nil {
		return fmt.Errorf("act as uid %d: setgroups: %w", c.UID, err)
	}
	if _, err := unix.SetfsgidRetGid(int(c.GID)); err != nil {
		return fmt.Errorf("act as uid %d: setfsgid %d: %w", c.UID, c.GID, err)
	}
	if _, err := unix.SetfsuidRetUid(int(c.UID)); err != nil {
		return fmt.Errorf("act as uid %d: setfsuid: %w", c.UID, err)
	}
	// setfsuid(2) reports failure only by not changing anything: read the
	// value back (an invalid id leaves the previous one in place).
	if got, _ := unix.SetfsuidRetUid(-1); got != int(c.UID) {
		return fmt.Errorf("act as uid %d: setfsuid left fsuid %d", c.UID, got)
	}
	if got, _ := unix.SetfsgidRetGid(-1); got != int(c.GID) {
		return fmt.Errorf("act as uid %d: setfsgid left fsgid %d", c.UID, got)
	}
	return nil
}
