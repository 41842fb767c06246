package sensor

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

// Ring reads one BPF ring buffer on its own goroutine and hands each
// record to a handler. Records written without a wake-up are found by
// waking every period anyway; while the ring stays empty the wait doubles
// up to idle (the Go runtime's timer wake-ups were a third of coldtrace's
// CPU in a long, quiet run), and the first record brings it back. The
// probes wake the reader when a ring is half full (ring_wakeup in
// bpf/include/common.h), so a long wait cannot lose records; it only
// delays them.
type Ring struct {
	rd      *ringbuf.Reader
	flushed chan struct{}
	done    chan struct{}
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
	r := &Ring{rd: rd, flushed: make(chan struct{}, 1), done: make(chan struct{})}
	go r.read(period, max(idle, period), handle)
	return r, nil
}

func (r *Ring) read(period, idle time.Duration, handle func([]byte)) {
	defer close(r.done)
	var rec ringbuf.Record
	wait := period
	for {
		r.rd.SetDeadline(time.Now().Add(wait))
		err := r.rd.ReadInto(&rec)
		switch {
		case err == nil:
			handle(rec.RawSample)
			wait = period
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			wait = min(2*wait, idle)
		case errors.Is(err, ringbuf.ErrFlushed):
			select {
			case r.flushed <- struct{}{}:
			default:
			}
		default:
			r.mu.Lock()
			r.err = fmt.Errorf("read ring buffer: %w", err)
			r.mu.Unlock()
			return
		}
	}
}

// Drain waits until every record the kernel queued before the call has
// been handled, or timeout.
func (r *Ring) Drain(timeout time.Duration) error {
	if err := r.Err(); err != nil {
		return err
	}
	if err := r.rd.Flush(); err != nil {
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
	err := r.rd.Close()
	<-r.done
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
