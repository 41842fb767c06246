package download

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
)

// rxSlots is the kernel's per-thread receive slots, mapped: a thread
// that goes on receiving on one connection counts its receives in its
// slot, and they reach the connection's table entry only when another
// thread receives on it or it closes. A table entry read while it is
// open takes the counts its latest receiving thread's slot holds for it
// (pending).
type rxSlots struct {
	mem []byte
}

// rxSlotSize is one slot's bytes, as the kernel lays out the array.
const rxSlotSize = int(unsafe.Sizeof(bpfdl.DownloadRxSlot{}))

func mapRxSlots(m interface {
	FD() int
	MaxEntries() uint32
	ValueSize() uint32
}) (*rxSlots, error) {
	if int(m.ValueSize()) != rxSlotSize {
		return nil, fmt.Errorf("receive slots of %d bytes, want %d", m.ValueSize(), rxSlotSize)
	}
	mem, err := unix.Mmap(m.FD(), 0, int(m.MaxEntries())*rxSlotSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the receive slots: %w", err)
	}
	return &rxSlots{mem: mem}, nil
}

// load reads the 8-byte field at off of slot i; the kernel writes it
// meanwhile.
func (r *rxSlots) load(i int, off uintptr) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[i*rxSlotSize+int(off)])))
}

// pending adds to c what its latest receiving thread's slot holds for it
// and has not folded into the entry yet.
func (r *rxSlots) pending(c *bpfdl.DownloadConn) {
	if r == nil || c.RxTid == 0 {
		return
	}
	i := int(c.RxSlot)
	if (i+1)*rxSlotSize > len(r.mem) {
		return
	}
	var s bpfdl.DownloadRxSlot
	if r.load(i, unsafe.Offsetof(s.Sk)) != c.Sk || r.load(i, unsafe.Offsetof(s.Id)) != c.Id {
		return
	}
	c.Bytes += r.load(i, unsafe.Offsetof(s.Bytes))
	c.Recvs += r.load(i, unsafe.Offsetof(s.Recvs))
	c.LastTs = max(c.LastTs, r.load(i, unsafe.Offsetof(s.LastTs)))
	c.Sent = max(c.Sent, r.load(i, unsafe.Offsetof(s.Sent)))
}

func (r *rxSlots) close() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}
