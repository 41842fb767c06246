package sched

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// trackedBits is the object's tracked_tgids map (a bit per process any of
// whose threads is tracked: the first test of every program on an event
// all processes have, bpf/include/common.h) mapped into this process, so
// that the bits of the threads seeded from here are set with an atomic
// OR, as the kernel side sets its children's: a read, modify and write
// through the map's update call could drop a bit the kernel set in the
// same word meanwhile (attach seeds threads of a running process, whose
// other threads fork).
type trackedBits struct {
	mem []byte
}

func mapTrackedBits(m *ebpf.Map) (*trackedBits, error) {
	// The kernel side masks a word's index with words-1, as set does.
	if words := m.MaxEntries(); m.ValueSize() != 8 || words&(words-1) != 0 {
		return nil, fmt.Errorf("tracked processes' bits: %d words of %d bytes, want a power of two of 8", words, m.ValueSize())
	}
	size := int(m.MaxEntries()) * int(m.ValueSize())
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the tracked processes' bits: %w", err)
	}
	return &trackedBits{mem: mem}, nil
}

// set marks process tgid as tracked; before its threads' task storage is
// written, so that no program skips a thread it would find.
func (b *trackedBits) set(tgid uint32) {
	words := len(b.mem) / 8
	i := int(tgid>>6) & (words - 1)
	atomic.OrUint64((*uint64)(unsafe.Pointer(&b.mem[i*8])), 1<<(tgid&63))
}

// has reports whether tgid's bit is set.
func (b *trackedBits) has(tgid uint32) bool {
	words := len(b.mem) / 8
	i := int(tgid>>6) & (words - 1)
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b.mem[i*8])))&(1<<(tgid&63)) != 0
}

func (b *trackedBits) close() error {
	if b == nil || b.mem == nil {
		return nil
	}
	err := unix.Munmap(b.mem)
	b.mem = nil
	return err
}
