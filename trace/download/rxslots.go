package download

import (
	"github.com/cilium/ebpf"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
)

// rxSlots is the kernel's per-thread receive slots: a thread that goes on
// receiving on one connection counts its receives in its slot, and they
// reach the connection's table entry only when another thread receives
// on it, the thread on another connection, or it closes. A table entry
// read while it is open takes what its latest receiving thread's slot
// holds for it (pending). One lookup per connection read, not a mapping
// of the whole array: mapped, its 3.5 MiB counted in coldtrace's
// resident memory.
type rxSlots struct {
	m *ebpf.Map
}

// pending adds to c what its latest receiving thread's slot holds for it
// and has not folded into the entry yet. A slot that cannot be read adds
// nothing: the entry's own counts stand.
func (r *rxSlots) pending(c *bpfdl.DownloadConn) {
	if r == nil || r.m == nil || c.RxTid == 0 {
		return
	}
	var s bpfdl.DownloadRxSlot
	if err := r.m.Lookup(c.RxSlot, &s); err != nil || s.Sk != c.Sk || s.Id != c.Id {
		return
	}
	c.Bytes += s.Bytes
	c.Recvs += s.Recvs
	c.LastTs = max(c.LastTs, s.LastTs)
	c.Sent = max(c.Sent, s.Sent)
}

// eachOpenConn calls f with every connection still in the table, each
// with what its latest receiving thread's slot holds for it (pending):
// how the sensor reads the table.
func (s *Sensor) eachOpenConn(f func(*bpfdl.DownloadConn)) error {
	var sk uint64
	var raw bpfdl.DownloadConn
	it := s.objs.Conns.Iterate()
	for it.Next(&sk, &raw) {
		s.rx.pending(&raw)
		f(&raw)
	}
	return it.Err()
}
