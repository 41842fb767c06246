package probe

import "github.com/cilium/ebpf"

// RingBytes is the size of the scheduler's and page cache's ring buffers.
// All of a ring buffer's pages are mapped into coldtrace when its reader
// opens it, the data twice (it is mapped again after itself, for records
// that wrap): a ring counts twice its size in coldtrace's RSS from the
// start, whatever goes through it. The two 4 MiB rings were 16 MiB of a
// 58 MiB peak; their records are small and drained every 50 ms, and the
// bench's fork/exec storm and small-files workloads lose none at 1 MiB.
const RingBytes = 1 << 20

// SizeRing sets the ring buffer map name of spec to RingBytes, when spec
// has it bigger.
func SizeRing(spec *ebpf.CollectionSpec, name string) {
	if m, ok := spec.Maps[name]; ok && m.Type == ebpf.RingBuf && m.MaxEntries > RingBytes {
		m.MaxEntries = RingBytes
	}
}
