package probe

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Ring reads one BPF ring buffer on its own goroutine and hands each
// record to a handler. Records written without a wake-up are found by
// looking every period anyway; while the ring stays empty the wait doubles
// up to idle (the Go runtime's timer wake-ups were a third of coldtrace's
// CPU in a long, quiet run), and the first record brings it back. The
// probes wake the reader when a ring is half full (ring_wakeup in
// bpf/include/common.h), so a long wait cannot lose records; it only
// delays them.
//
// The wait is in the Go runtime's network poller, on a duplicate of the
// ring's descriptor, and each look is a non-blocking read: a reader
// blocked in its own epoll_wait(2) holds a thread in a system call, and
// the runtime's monitor thread, which takes such threads' processors
// back, then woke about 100 times a second for as long as the run lasted
// (0.4% of a core with four rings and an idle command, measured here).
type Ring struct {
	rd   *ringbuf.Reader
	wake *os.File // the ring's descriptor again, in the network poller
	done chan struct{}
	// flush asks the reader to look now and to answer on flushed.
	flush   atomic.Bool
	flushed chan struct{}
	closing atomic.Bool
	mu      sync.Mutex
	err     error // why reading stopped, other than Close
}

// StartRing opens a reader on m and calls handle for each record from a
// new goroutine until Close, looking every period, or up to every idle
// while the ring stays empty. handle must not keep raw after it returns.
func StartRing(m *ebpf.Map, period, idle time.Duration, handle func(raw []byte)) (*Ring, error) {
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, fmt.Errorf("open ring buffer %s: %w", m, err)
	}
	wake, err := pollable(m)
	if err != nil {
		rd.Close()
		return nil, fmt.Errorf("ring buffer %s: %w", m, err)
	}
	r := &Ring{rd: rd, wake: wake, flushed: make(chan struct{}, 1), done: make(chan struct{})}
	go r.read(period, max(idle, period), handle)
	return r, nil
}

// pollable is a non-blocking duplicate of m's descriptor that the
// runtime's poller watches: readable once the kernel wakes the ring's
// readers.
func pollable(m *ebpf.Map) (*os.File, error) {
	fd, err := unix.FcntlInt(uintptr(m.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate descriptor: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("non-blocking descriptor: %w", err)
	}
	f := os.NewFile(uintptr(fd), "ringbuf")
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("not pollable: %w", err)
	}
	return f, nil
}

func (r *Ring) read(period, idle time.Duration, handle func([]byte)) {
	defer close(r.done)
	raw, err := r.wake.SyscallConn()
	if err != nil {
		r.fail(fmt.Errorf("ring buffer descriptor: %w", err))
		return
	}
	var rec ringbuf.Record
	wait := period
	for {
		// Take everything there is, without waiting: records queued
		// before a flush asked up to here are among it.
		flushing := r.flush.Swap(false)
		got := false
		for {
			r.rd.SetDeadline(time.Now().Add(-time.Second))
			err := r.rd.ReadInto(&rec)
			if err == nil {
				handle(rec.RawSample)
				got = true
				continue
			}
			if errors.Is(err, ringbuf.ErrClosed) {
				return
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				r.fail(fmt.Errorf("read ring buffer: %w", err))
				return
			}
			break
		}
		if flushing {
			select {
			case r.flushed <- struct{}{}:
			default:
			}
		}
		if got {
			wait = period
		} else {
			wait = min(2*wait, idle)
		}
		// Wait for a wake-up, the next look, a flush or Close. A flush
		// asked before the deadline was set is seen here; one asked
		// after it moves the deadline to the past.
		if err := r.wake.SetReadDeadline(time.Now().Add(wait)); err != nil {
			return // closed
		}
		if r.flush.Load() {
			continue
		}
		calls := 0
		err := raw.Read(func(uintptr) bool { calls++; return calls > 1 })
		switch {
		case err == nil, errors.Is(err, os.ErrDeadlineExceeded):
		case r.closing.Load():
			return
		default:
			r.fail(fmt.Errorf("wait for ring buffer: %w", err))
			return
		}
	}
}

func (r *Ring) fail(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// Drain waits until every record the kernel queued before the call has
// been handled, or timeout.
func (r *Ring) Drain(timeout time.Duration) error {
	if err := r.Err(); err != nil {
		return err
	}
	// Drop an answer to an earlier flush that timed out.
	select {
	case <-r.flushed:
	default:
	}
	r.flush.Store(true)
	if err := r.wake.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		return fmt.Errorf("flush ring buffer: %w", err)
	}
	select {
	case <-r.flushed:
		return nil
	case <-r.done:
		return r.Err()
	case <-time.After(timeout):
		return fmt.Errorf("the ring buffer did not drain in %v", timeout)
	}
}

// Err is why the reader stopped early, if it did.
func (r *Ring) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close stops the reader and waits for its goroutine.
func (r *Ring) Close() error {
	r.closing.Store(true)
	werr := r.wake.Close() // wakes a waiting reader: it returns
	<-r.done
	err := r.rd.Close()
	if err == nil {
		err = werr
	}
	return err
}

// Decode checks that raw holds at least the first minLen bytes of a T and
// returns it as a T: in place when raw holds a whole T (ring-buffer
// samples are 8-byte aligned), else copied into a zeroed T (records sent
// with only their used length). In place, the result lives as long as
// raw.
func Decode[T any](raw []byte, minLen uintptr) (*T, bool) {
	var zero T
	size := unsafe.Sizeof(zero)
	if uintptr(len(raw)) < minLen || minLen > size {
		return nil, false
	}
	if uintptr(len(raw)) >= size {
		return (*T)(unsafe.Pointer(&raw[0])), true
	}
	t := new(T)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(t)), size), raw)
	return t, true
}

// CString is the NUL-terminated string at the start of b.
func CString[B ~int8 | ~uint8](b []B) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	s := make([]byte, n)
	for i := range s {
		s[i] = byte(b[i])
	}
	return string(s)
}

// Bytes is b as bytes (the generated types hold C chars as int8).
func Bytes(b []int8) []byte {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b))
}
