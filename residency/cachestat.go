package residency

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pageSize is the unit cachestat counts in.
var pageSize = int64(os.Getpagesize())

// Counts are one file's page-cache pages, from cachestat(2). Evicted
// counts pages evicted since the file was opened by anyone and still
// remembered by the kernel (shadow entries); RecentlyEvicted those whose
// refault would count as thrashing.
type Counts struct {
	Cached          uint64 `json:"cached_pages"`
	Dirty           uint64 `json:"dirty_pages"`
	Writeback       uint64 `json:"writeback_pages"`
	Evicted         uint64 `json:"evicted_pages"`
	RecentlyEvicted uint64 `json:"recently_evicted_pages"`
}

// ErrUnknown means the kernel will not tell this user the file's
// residency truthfully (cachestat EPERM: neither owner nor writer), or
// cannot (no cachestat on this kernel).
var ErrUnknown = errors.New("residency unknown")

// UnknownError is ErrUnknown with its reason, in words a user can act on.
type UnknownError struct{ Reason string }

func (e *UnknownError) Error() string { return ErrUnknown.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrUnknown) hold.
func (e *UnknownError) Is(target error) bool { return target == ErrUnknown }

func unknownReason(err error) string {
	switch {
	case errors.Is(err, unix.EPERM):
		return "cachestat refused: only the owner, a user who may write the file, or root may see its page cache"
	case errors.Is(err, unix.ENOSYS):
		return "this kernel has no cachestat(2) (needs Linux 6.5)"
	}
	return err.Error()
}

// cachestatFile counts the pages of all of f. unknown says why this
// user may not see them ("" when it may); err is any other failure.
func cachestatFile(f *os.File) (c Counts, unknown string, err error) {
	c, err = cachestat(f, 0, 0)
	var u *UnknownError
	if errors.As(err, &u) {
		return Counts{}, u.Reason, nil
	}
	return c, "", err
}

// cachestat counts the pages of f in [off, off+length) (length 0: to the
// end). It must run inside the Actor: the kernel checks the calling
// thread's credentials. EPERM and ENOSYS come back as an *UnknownError.
func cachestat(f *os.File, off, length int64) (Counts, error) {
	rng := unix.CachestatRange{Off: uint64(off), Len: uint64(length)}
	var cs unix.Cachestat_t
	var err error
	// SyscallConn's Control runs on this goroutine, so on the Actor's
	// thread.
	rc, cerr := f.SyscallConn()
	if cerr != nil {
		return Counts{}, fmt.Errorf("cachestat %s: %w", f.Name(), cerr)
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.Cachestat(uint(fd), &rng, &cs, 0) }); cerr != nil {
		return Counts{}, fmt.Errorf("cachestat %s: %w", f.Name(), cerr)
	}
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) {
			return Counts{}, &UnknownError{Reason: unknownReason(err)}
		}
		return Counts{}, fmt.Errorf("cachestat %s: %w", f.Name(), err)
	}
	return Counts{Cached: cs.Cache, Dirty: cs.Dirty, Writeback: cs.Writeback,
		Evicted: cs.Evicted, RecentlyEvicted: cs.Recently_evicted}, nil
}

// pagesOf is the number of pages a file of size bytes spans.
func pagesOf(size int64) uint64 {
	if size <= 0 {
		return 0
	}
	return uint64((size + pageSize - 1) / pageSize)
}

// cachedBytes converts cached pages of a file of size bytes to bytes; the
// last page counts only for the part of it inside the file.
func cachedBytes(pages uint64, size int64) int64 {
	b := int64(pages) * pageSize
	if b > size {
		b = size
	}
	return b
}
