package actor

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Do runs work with the user's file rights: their fsuid, fsgid and groups,
// and no capabilities. When coldtrace already has exactly those rights (a
// real root login, a non-root run) it runs work directly. work's own file
// system calls must happen on the goroutine Do calls it on (see the
// package comment). Do returns work's error, or why the rights could not
// be taken or given back.
func (a Actor) Do(work func() error) error {
	if !a.resolved {
		return ErrUnresolved
	}
	if !a.switchFiles {
		return work()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		clean, err := a.onThisThread(work)
		if clean {
			runtime.UnlockOSThread()
		}
		// Not clean: the goroutine ends locked, so the runtime ends the
		// thread instead of running other goroutines with these rights.
		done <- err
	}()
	return <-done
}

// threadCreds are the per-thread credentials that decide file access.
type threadCreds struct {
	fsuid, fsgid uint32
	groups       []uint32
	caps         [2]unix.CapUserData
}

// onThisThread takes the user's rights on the locked thread, runs work
// and restores the thread. clean is false when the thread may still hold
// anything but its own credentials.
func (a Actor) onThisThread(work func() error) (clean bool, err error) {
	saved, err := currentCreds()
	if err != nil {
		return true, fmt.Errorf("read thread credentials: %w", err)
	}
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	want := threadCreds{fsuid: a.UID, fsgid: a.GID, groups: groupsOf(a.User)}
	if err := setCreds(want, true); err != nil {
		err = fmt.Errorf("take the rights of %s: %w", describe(a.User), err)
		if rerr := restoreCreds(saved); rerr != nil {
			return false, errors.Join(err, rerr)
		}
		return true, err
	}
	werr := work()
	if rerr := restoreCreds(saved); rerr != nil {
		return false, errors.Join(werr, rerr)
	}
	// A change of fsuid makes the kernel mark the whole process not
	// dumpable; give back what a run without Do would have.
	if dumpable == 1 {
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	}
	return true, werr
}

func groupsOf(u User) []uint32 {
	gs := make([]uint32, 0, len(u.Groups)+1)
	gs = append(gs, u.GID)
	for _, g := range u.Groups {
		if uint32(g) != u.GID {
			gs = append(gs, uint32(g))
		}
	}
	return gs
}

// setCreds gives this thread creds' groups, fsgid and fsuid, in that
// order (setting groups and fsgid needs CAP_SETGID, which a thread whose
// fsuid is not 0 may still have, but clearing capabilities comes last).
// dropCaps clears the effective capabilities; otherwise creds.caps are set.
func setCreds(c threadCreds, dropCaps bool) error {
	if !dropCaps {
		// Raise the effective set first: changing ids needs CAP_SETUID
		// and CAP_SETGID.
		if err := capset(c.caps); err != nil {
			return fmt.Errorf("restore capabilities: %w", err)
		}
	}
	if err := setgroups(c.groups); err != nil {
		return fmt.Errorf("setgroups %v: %w", c.groups, err)
	}
	rawSetID(sysSetfsgid, c.fsgid)
	if got := rawSetID(sysSetfsgid, noID); got != c.fsgid {
		return fmt.Errorf("setfsgid %d: thread still has fsgid %d", c.fsgid, got)
	}
	rawSetID(sysSetfsuid, c.fsuid)
	if got := rawSetID(sysSetfsuid, noID); got != c.fsuid {
		return fmt.Errorf("setfsuid %d: thread still has fsuid %d", c.fsuid, got)
	}
	if dropCaps {
		caps, err := capget()
		if err != nil {
			return err
		}
		caps[0].Effective, caps[1].Effective = 0, 0
		if err := capset(caps); err != nil {
			return fmt.Errorf("clear capabilities: %w", err)
		}
	}
	got, err := currentCreds()
	if err != nil {
		return err
	}
	// The kernel keeps groups sorted.
	if !slices.Equal(sorted(got.groups), sorted(c.groups)) {
		return fmt.Errorf("setgroups %v: thread has %v", c.groups, got.groups)
	}
	if dropCaps && (got.caps[0].Effective != 0 || got.caps[1].Effective != 0) {
		return fmt.Errorf("thread keeps capabilities %#x %#x", got.caps[0].Effective, got.caps[1].Effective)
	}
	if !dropCaps && got.caps != c.caps {
		return fmt.Errorf("capabilities %+v, want %+v", got.caps, c.caps)
	}
	return nil
}

func sorted(gs []uint32) []uint32 {
	s := slices.Clone(gs)
	slices.Sort(s)
	return s
}

func restoreCreds(saved threadCreds) error {
	if err := setCreds(saved, false); err != nil {
		return fmt.Errorf("restore thread credentials: %w", err)
	}
	return nil
}

func currentCreds() (threadCreds, error) {
	var c threadCreds
	c.fsuid = rawSetID(sysSetfsuid, noID)
	c.fsgid = rawSetID(sysSetfsgid, noID)
	gs, err := getgroups()
	if err != nil {
		return c, err
	}
	c.groups = gs
	c.caps, err = capget()
	return c, err
}

// noID is (uid_t)-1: setfsuid and setfsgid reject it, change nothing and
// return the current id, which is the only way to read them.
const noID = ^uint32(0)

// rawSetID calls setfsuid or setfsgid for this thread only and returns the
// id the thread had before. Both calls return that id even on failure, so
// the caller checks by reading the id back.
func rawSetID(nr uintptr, id uint32) uint32 {
	r, _, _ := unix.RawSyscall(nr, uintptr(id), 0, 0)
	return uint32(r)
}

// setgroups sets this thread's supplementary groups; syscall.Setgroups
// would set every thread's.
func setgroups(gs []uint32) error {
	var p unsafe.Pointer
	if len(gs) > 0 {
		p = unsafe.Pointer(&gs[0])
	}
	if _, _, e := unix.RawSyscall(sysSetgroups, uintptr(len(gs)), uintptr(p), 0); e != 0 {
		return e
	}
	return nil
}

func getgroups() ([]uint32, error) {
	n, _, e := unix.RawSyscall(sysGetgroups, 0, 0, 0)
	if e != 0 {
		return nil, fmt.Errorf("getgroups: %w", e)
	}
	gs := make([]uint32, n)
	if n == 0 {
		return gs, nil
	}
	m, _, e := unix.RawSyscall(sysGetgroups, n, uintptr(unsafe.Pointer(&gs[0])), 0)
	if e != 0 {
		return nil, fmt.Errorf("getgroups: %w", e)
	}
	return gs[:m], nil
}

// capget and capset read and set this thread's capabilities (pid 0 is the
// calling thread).
func capget() ([2]unix.CapUserData, error) {
	var d [2]unix.CapUserData
	h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&h, &d[0]); err != nil {
		return d, fmt.Errorf("capget: %w", err)
	}
	return d, nil
}

func capset(d [2]unix.CapUserData) error {
	h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capset(&h, &d[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
