package pagecache

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// probes owns the loaded object and its links.
type probes struct {
	objs  bpfpc.PagecacheObjects
	links []link.Link
}

// load loads the page-cache object with the scheduler's shared maps in
// place of its own.
func load(shared, stacks map[string]*ebpf.Map, kernel *btf.Cache) (*probes, error) {
	spec, err := bpfpc.LoadPagecache()
	if err != nil {
		return nil, fmt.Errorf("load page-cache probes: %w", err)
	}
	probe.SizeRing(spec, bpfpc.PagecacheMapPaths)
	repl := make(map[string]*ebpf.Map, len(shared)+len(stacks))
	for k, v := range shared {
		repl[k] = v
	}
	for k, v := range stacks {
		repl[k] = v
	}
	if stacks != nil {
		// Threads without a Python stack take their leaf native frame.
		if err := spec.Variables[bpfpc.PagecacheVarPyStacksOn].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("load page-cache probes: %w", err)
		}
	} else {
		// No walker (--no-stacks): its maps stay empty, so no walk
		// runs; they are made as small as they can be.
		for _, name := range []string{bpfpc.PagecacheMapPyConfs, bpfpc.PagecacheMapPyStacks, bpfpc.PagecacheMapPyNatives} {
			if m := spec.Maps[name]; m != nil {
				m.MaxEntries = 1
			}
		}
		if m := spec.Maps[bpfpc.PagecacheMapPyEvents]; m != nil {
			m.MaxEntries = uint32(os.Getpagesize())
		}
	}
	// Paths seen in another mount namespace wake the reader at once,
	// while the namespace's mounts can still be read; unknown (0), none
	// do.
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &st); err == nil {
		if err := spec.Variables[bpfpc.PagecacheVarSelfMntNs].Set(uint32(st.Ino)); err != nil {
			return nil, fmt.Errorf("load page-cache probes: %w", err)
		}
	}
	p := &probes{}
	if err := spec.LoadAndAssign(&p.objs, &ebpf.CollectionOptions{MapReplacements: repl, Cache: kernel}); err != nil {
		return nil, probe.LoadError("page-cache probes", err)
	}
	return p, nil
}

func (p *probes) attach() error {
	o := &p.objs
	list := []struct {
		name    string // the BTF tracepoint, or the classic one's event
		classic bool
		prog    *ebpf.Program
	}{
		{name: "mm_filemap_get_pages", prog: o.OnGetPages},
		{name: "mm_filemap_map_pages", prog: o.OnMapPages},
		{name: "mm_filemap_fault", prog: o.OnFilemapFault},
		{name: "mm_filemap_add_to_page_cache", prog: o.OnAddToCache},
		{name: "block_bio_queue", prog: o.OnBioQueue},
	}
	for _, a := range list {
		var l link.Link
		var err error
		if a.classic {
			l, err = link.Tracepoint("filemap", a.name, a.prog, nil)
		} else {
			l, err = link.AttachTracing(link.TracingOptions{Program: a.prog})
		}
		if err != nil {
			return fmt.Errorf("attach tracepoint %s: %w", a.name, err)
		}
		p.links = append(p.links, l)
	}
	return nil
}

func (p *probes) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = err
		}
	}
	for i := len(p.links) - 1; i >= 0; i-- {
		keep(p.links[i].Close())
	}
	p.links = nil
	keep(p.objs.Close())
	return first
}
