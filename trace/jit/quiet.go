package jit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"

	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
	"github.com/coldtrace/coldtrace/registry"
)

// The kernel side of quiet opens (jit.bpf.c, quiet_open): successful
// read-only opens outside every cache root stay in the kernel once user
// space has put the process's roots in root_prefixes and written the
// process's generation into proc_verdicts. These must match the C.
const (
	quietPrefixLen   = 128 // PREFIX_LEN
	quietMaxAnywhere = 4   // MAX_ANYWHERE
	fnvOffset        = 0xcbf29ce484222325
	fnvPrime         = 0x100000001b3
)

// componentHash is the FNV-1a hash quiet_open computes for a path
// component.
func componentHash(name string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * fnvPrime
	}
	return h
}

// anywhereHashes are the hashes of every component of the in-tree cache
// directories of specs ("**/__pycache__", "**/ComfyUI/models"): a path
// with one of them always reaches user space. ok is false when there are
// more than the kernel side holds: then nothing may be dropped.
func anywhereHashes(specs []registry.Spec) (hs []uint64, ok bool) {
	seen := map[string]bool{}
	for i := range specs {
		for _, tmpl := range append(append([]string(nil), specs[i].Paths...), specs[i].Also...) {
			d, found := strings.CutPrefix(tmpl, "**/")
			if !found {
				continue
			}
			for _, c := range strings.Split(strings.Trim(d, "/"), "/") {
				if c == "" || seen[c] {
					continue
				}
				seen[c] = true
				hs = append(hs, componentHash(c))
			}
		}
	}
	return hs, len(hs) <= quietMaxAnywhere
}

// rootPrefixKey is the LPM key of a fixed root: its path with a trailing
// '/', cut at the key's length (a longer root then lets through a little
// more than it holds, never less).
func rootPrefixKey(root string) bpfjit.JitRootPrefix {
	p := root
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	var k bpfjit.JitRootPrefix
	n := copy(k.Data[:], p)
	k.Prefixlen = uint32(n * 8)
	return k
}

// quietSet feeds the kernel's filter. Nil-safe: a sensor without it (or
// with the filter off) drops nothing.
type quietSet struct {
	prefixes *ebpf.Map
	verdicts *ebpf.Map
	// off is set once the filter could not be kept exact (a root that
	// did not fit): every verdict is withdrawn and none is written again.
	off bool
	err error
	// Until the path-syscall probes attach no open is filtered, and a
	// verdict written to the kernel at each exec and fork was a system
	// call apiece for nothing (7 µs each: 140 ms of coldtrace's CPU in a
	// storm of 10,000 fork/execs). Verdicts wait in pending, the newest
	// generation per process, and are written when the probes attach.
	attached bool
	pending  map[int32]uint64
}

// addRoot lets opens under a fixed root through. It must run before any
// verdict for a process whose environment names the root.
func (q *quietSet) addRoot(root string) {
	if q == nil || q.off {
		return
	}
	k := rootPrefixKey(root)
	if err := q.prefixes.Update(&k, uint8(1), ebpf.UpdateAny); err != nil {
		q.disable(fmt.Errorf("jit: cache root %s not given to the kernel filter (%v): every open is traced from now on", root, err))
	}
}

// resolved says that the roots of process pid's generation gen are in
// place: its plain opens outside them may stay in the kernel.
func (q *quietSet) resolved(pid int32, gen uint64) {
	if q == nil || q.off || gen == 0 {
		return
	}
	if !q.attached {
		if q.pending == nil {
			q.pending = map[int32]uint64{}
		}
		q.pending[pid] = gen
		return
	}
	q.write(pid, gen)
}

// attach writes the verdicts that waited for the path-syscall probes.
// Each one's roots were put in place when its exec or fork was handled.
func (q *quietSet) attach() {
	if q == nil || q.attached {
		return
	}
	q.attached = true
	for pid, gen := range q.pending {
		if q.off {
			break
		}
		q.write(pid, gen)
	}
	q.pending = nil
}

// forget drops a process's waiting verdict (it exited).
func (q *quietSet) forget(pid int32) {
	if q != nil {
		delete(q.pending, pid)
	}
}

func (q *quietSet) write(pid int32, gen uint64) {
	v := bpfjit.JitProcVerdict{Gen: gen}
	if err := q.verdicts.Update(uint32(pid), &v, ebpf.UpdateAny); err != nil {
		q.disable(fmt.Errorf("jit: kernel filter verdict for pid %d: %v: every open is traced from now on", pid, err))
	}
}

// disable withdraws every verdict: from then on each open reaches user
// space, as without the filter.
func (q *quietSet) disable(why error) {
	q.off = true
	q.err = why
	q.pending = nil
	var key uint32
	var keys []uint32
	var v bpfjit.JitProcVerdict
	it := q.verdicts.Iterate()
	for it.Next(&key, &v) {
		keys = append(keys, key)
	}
	for _, k := range keys {
		if err := q.verdicts.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			q.err = fmt.Errorf("%w; and withdrawing the verdicts failed: %v", why, err)
		}
	}
}
