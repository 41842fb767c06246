package probe

import (
	"sync"

	"golang.org/x/sys/unix"
)

// MonotonicNS is CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns.
func MonotonicNS() uint64 {
	var ts unix.Timespec
	// CLOCK_MONOTONIC cannot fail on Linux: the clock id is valid and
	// the pointer is ours.
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// Rel is ts relative to start, 0 when before it.
func Rel(ts, start uint64) int64 {
	if ts <= start {
		return 0
	}
	return int64(ts - start)
}

// FileKey names a file as the BPF side does: super_block s_dev in the
// kernel's encoding (major<<20|minor), the inode number and, from the
// page-cache and scheduler sensors, the inode's generation (a file given
// an inode number freed during the run has another; 0 where the sensor
// or the filesystem keeps none).
type FileKey struct {
	Dev uint32
	Ino uint64
	Gen uint32
}

// PIDSet is the set of every process that was part of the run, exited
// ones included, safe for concurrent use.
type PIDSet struct {
	mu   sync.RWMutex
	pids map[int32]struct{}
}

// NewPIDSet returns an empty set.
func NewPIDSet() *PIDSet { return &PIDSet{pids: map[int32]struct{}{}} }

// Add puts pid in the set.
func (s *PIDSet) Add(pid int32) {
	s.mu.Lock()
	s.pids[pid] = struct{}{}
	s.mu.Unlock()
}

// Has says whether pid was ever part of the run.
func (s *PIDSet) Has(pid int32) bool {
	s.mu.RLock()
	_, ok := s.pids[pid]
	s.mu.RUnlock()
	return ok
}
