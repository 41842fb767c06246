package jit

import (
	"sync"

	"github.com/cilium/ebpf"

	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
)

// wakes tells the exec and fork programs which of their records need the
// reader soon (bpf/jit: exec_wake, fork_wake). A record that does not wake
// it is read at the next poll, 50 ms at most later, in order with the
// rest. Waking it every 10 ms through a fork/exec storm made the storm 5%
// slower: the reader's threads ran beside it each time.
//
// An exec needs the reader soon the first times its image (program and
// environment size) is seen: a framework it names or whose cache its
// environment sets attaches the path-syscall probes, and a program that
// can call a gated function (getaddrinfo) gets its links. Once both are
// known not to apply, the image's later execs wait for a poll. A fork
// needs it when the parent has links: the child inherits the breakpoints,
// not the links, and gets its own once its record is read.
type wakes struct {
	mu     sync.Mutex
	known  *ebpf.Map // image key → KNOWN_ bits
	linked *ebpf.Map // pid → 1
	prompt *ebpf.Variable
	bits   map[bpfjit.JitImageKey]bpfjit.JitKnownBit
}

func newWakes(known, linked *ebpf.Map, prompt *ebpf.Variable) *wakes {
	return &wakes{known: known, linked: linked, prompt: prompt, bits: map[bpfjit.JitImageKey]bpfjit.JitKnownBit{}}
}

// knows says whether every bit of key is written already.
func (w *wakes) knows(key bpfjit.JitImageKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bits[key] == bpfjit.JitKnownBitKNOWN_ALL
}

// mark sets bit for key. A failed write (the table full of other images)
// only leaves the image's execs waking the reader, as before it was seen.
func (w *wakes) mark(key bpfjit.JitImageKey, bit bpfjit.JitKnownBit) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.bits[key] | bit
	if v == w.bits[key] {
		return
	}
	w.bits[key] = v
	_ = w.known.Put(key, uint32(v))
}

// setLinked records whether pid has uprobe links (uprobes.Scoper.OnLinked).
func (w *wakes) setLinked(pid int32, linked bool) {
	k := uint32(pid)
	if linked {
		_ = w.linked.Put(k, uint8(1)) // full: its forks wait for a poll
		return
	}
	_ = w.linked.Delete(k)
}

// promptAll has every exec and fork wake the reader (while the
// path-syscall probes are on) or not.
func (w *wakes) promptAll(on bool) error {
	var v uint32
	if on {
		v = 1
	}
	return w.prompt.Set(v)
}
