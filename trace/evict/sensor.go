package evict

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	bpfevict "github.com/coldtrace/coldtrace/bpf/evict"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/machine"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// Options connect the sensor to the rest of the run.
type Options struct {
	// Shared are the scheduler object's maps by name (sched.Shared's
	// Replacements): files and run_pages.
	Shared map[string]*ebpf.Map
	// Traced says whether a process was part of the run.
	Traced func(pid int32) bool
	// Cgroup returns a process's memory cgroup ("" when unknown); by
	// default read from /proc/PID/cgroup.
	Cgroup func(pid int32) string
	// BTF is the kernel BTF the sensors share (nil: loaded for this one).
	BTF *btf.Cache
	// Chained leaves the insertion program (InsertProgram) unattached:
	// the page-cache object runs it by tail call, so that
	// mm_filemap_add_to_page_cache carries one program. The page
	// cache's program takes the chain's untracked slot only for threads
	// it found untracked, so the insertion program skips its own lookup.
	Chained bool
}

// Sensor is the loaded eviction sensor.
type Sensor struct {
	objs  bpfevict.EvictObjects
	links []link.Link
	opts  Options

	mu sync.Mutex
	// cgroups remembers each evicting process's memory cgroup, read at
	// the first poll that saw it (it may exit before the run ends).
	cgroups map[int32]string
	// evictors and inserters are the tables as the last poll read them:
	// the record's counts are those of the last poll (the page-cache
	// sensor's files too), not of the moment Finish runs.
	evictors  map[bpfevict.EvictEvictKey]bpfevict.EvictEvictStats
	inserters map[bpfevict.EvictInserterKey]bpfevict.EvictInserterStats

	// writes is the kernel's count of table writes at the last read of
	// the tables (polled is false before the first).
	writes uint64
	polled bool

	evKeys  []bpfevict.EvictEvictKey
	evVals  []bpfevict.EvictEvictStats
	insKeys []bpfevict.EvictInserterKey
	insVals []bpfevict.EvictInserterStats
}

// New loads and attaches the eviction probes.
func New(opts Options) (*Sensor, error) {
	if opts.Traced == nil {
		opts.Traced = func(int32) bool { return false }
	}
	if opts.Cgroup == nil {
		opts.Cgroup = MemoryCgroup
	}
	spec, err := bpfevict.LoadEvict()
	if err != nil {
		return nil, fmt.Errorf("load eviction probes: %w", err)
	}
	if opts.Chained {
		if err := spec.Variables[bpfevict.EvictVarChainedUntracked].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("load eviction probes: chained insertion program: %w", err)
		}
	}
	kernel := opts.BTF
	// Not held past the load: the decoded kernel BTF is megabytes of heap
	// (twice that of RSS) for the whole run.
	opts.BTF = nil
	s := &Sensor{opts: opts, cgroups: map[int32]string{},
		evKeys: make([]bpfevict.EvictEvictKey, probe.BatchSize), evVals: make([]bpfevict.EvictEvictStats, probe.BatchSize),
		insKeys: make([]bpfevict.EvictInserterKey, probe.BatchSize), insVals: make([]bpfevict.EvictInserterStats, probe.BatchSize)}
	if err := spec.LoadAndAssign(&s.objs, &ebpf.CollectionOptions{MapReplacements: opts.Shared, Cache: kernel}); err != nil {
		return nil, probe.LoadError("eviction probes", err)
	}
	o := &s.objs
	for _, a := range []struct {
		name string
		prog *ebpf.Program
	}{
		{"mm_vmscan_direct_reclaim_begin", o.OnDirectBegin},
		{"mm_vmscan_direct_reclaim_end", o.OnDirectEnd},
		{"mm_vmscan_memcg_reclaim_begin", o.OnMemcgBegin},
		{"mm_vmscan_memcg_reclaim_end", o.OnMemcgEnd},
		{"mm_filemap_delete_from_page_cache", o.OnDelete},
		{"mm_filemap_add_to_page_cache", o.OnOtherInsert},
	} {
		if opts.Chained && a.prog == o.OnOtherInsert {
			continue
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: a.prog})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("attach tracepoint %s: %w", a.name, err)
		}
		s.links = append(s.links, l)
	}
	return s, nil
}

// InsertProgram is the program that counts other processes' insertions
// into the run's files, for the page-cache object's chain (Chained).
func (s *Sensor) InsertProgram() *ebpf.Program { return s.objs.OnOtherInsert }

// Begin is part of the session's sensor interface.
func (s *Sensor) Begin(uint64) {}

// Poll reads the evictors and inserters, and the evicting processes'
// memory cgroups while they live.
func (s *Sensor) Poll(_ uint64, _ *record.Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Read before the tables: a write after it moves it again.
	writes, err := probe.SumPerCPU(s.objs.TableWrites, 0)
	if err != nil {
		return fmt.Errorf("eviction table writes: %w", err)
	}
	if s.polled && writes == s.writes {
		return nil // nothing new: most polls of most runs
	}
	s.writes, s.polled = writes, true
	evictors := make(map[bpfevict.EvictEvictKey]bpfevict.EvictEvictStats, len(s.evictors))
	err = probe.ReadMap(s.objs.Evictors, s.evKeys, s.evVals, func(k bpfevict.EvictEvictKey, v *bpfevict.EvictEvictStats) {
		s.cgroupOf(int32(k.Tgid), bpfevict.EvictEvictKind(k.Kind))
		evictors[k] = *v
	})
	if err != nil {
		return fmt.Errorf("read evictors: %w", err)
	}
	inserters := make(map[bpfevict.EvictInserterKey]bpfevict.EvictInserterStats, len(s.inserters))
	err = probe.ReadMap(s.objs.Inserters, s.insKeys, s.insVals, func(k bpfevict.EvictInserterKey, v *bpfevict.EvictInserterStats) {
		inserters[k] = *v
	})
	if err != nil {
		return fmt.Errorf("read inserters: %w", err)
	}
	s.evictors, s.inserters = evictors, inserters
	return nil
}

// cgroupOf remembers the memory cgroup of a process that reclaimed.
// Called with s.mu held.
func (s *Sensor) cgroupOf(pid int32, kind bpfevict.EvictEvictKind) string {
	if kind != bpfevict.EvictEvictKindEVICT_MEMCG_RECLAIM && kind != bpfevict.EvictEvictKindEVICT_DIRECT_RECLAIM &&
		kind != bpfevict.EvictEvictKindEVICT_SYSCALL {
		return ""
	}
	cg, ok := s.cgroups[pid]
	if !ok {
		cg = s.opts.Cgroup(pid)
		s.cgroups[pid] = cg
	}
	return cg
}

// Finish writes each file's evictors and inserters into rec.Files (the
// page-cache sensor, which finishes first, wrote the files).
func (s *Sensor) Finish(rec *record.Record) error { return s.fill(rec) }

// fill writes the tables as the last poll read them into rec's files,
// and the kernel's lost count; it reads no table, so a checkpoint
// (Snapshot) takes it as well as the end of the run.
func (s *Sensor) fill(rec *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	byKey := map[probe.FileKey]*record.File{}
	for i := range rec.Files {
		f := &rec.Files[i]
		byKey[probe.FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen}] = f
	}
	for k, v := range s.evictors {
		f := byKey[probe.FileKey{Dev: k.Dev, Ino: k.Ino, Gen: k.Gen}]
		if f == nil || v.Pages == 0 {
			continue
		}
		kind := bpfevict.EvictEvictKind(k.Kind)
		pid := int32(k.Tgid)
		f.Evictors = append(f.Evictors, record.Evictor{Kind: kindName(kind), PID: pid, Comm: probe.CString(v.Comm[:]),
			Traced: s.opts.Traced(pid), Syscall: syscallName(k.Nr), Cgroup: s.cgroupOf(pid, kind), Pages: v.Pages})
	}
	for k, v := range s.inserters {
		f := byKey[probe.FileKey{Dev: k.Dev, Ino: k.Ino, Gen: k.Gen}]
		if f == nil || v.Pages == 0 {
			continue
		}
		f.Inserters = append(f.Inserters, record.Inserter{PID: int32(k.Tgid), Comm: probe.CString(v.Comm[:]), Pages: v.Pages})
	}
	for i := range rec.Files {
		f := &rec.Files[i]
		sortEvictors(f.Evictors)
		sort.SliceStable(f.Inserters, func(a, b int) bool {
			x, y := f.Inserters[a], f.Inserters[b]
			return x.Pages > y.Pages || x.Pages == y.Pages && x.PID < y.PID
		})
		// The files' counters were read a moment before the evictors:
		// an eviction in between is in the evictors only.
		var evicted uint64
		for _, e := range f.Evictors {
			evicted += e.Pages
		}
		f.PagesEvicted = max(f.PagesEvicted, evicted)
	}
	lost, err := probe.Lost(s.objs.Lost, bpfevict.EvictLostKindLOST_PAGES)
	if err != nil {
		return fmt.Errorf("evict: %w", err)
	}
	rec.Lost.Pages += lost[bpfevict.EvictLostKindLOST_PAGES]
	return nil
}

// Close releases the probes.
func (s *Sensor) Close() error {
	var first error
	for i := len(s.links) - 1; i >= 0; i-- {
		if err := s.links[i].Close(); err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
			first = err
		}
	}
	s.links = nil
	if err := s.objs.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// sortEvictors orders evictors heaviest first, then by kind and pid, so
// that a record does not depend on the map's order.
func sortEvictors(es []record.Evictor) {
	sort.SliceStable(es, func(a, b int) bool {
		x, y := es[a], es[b]
		if x.Pages != y.Pages {
			return x.Pages > y.Pages
		}
		if x.Kind != y.Kind {
			return x.Kind < y.Kind
		}
		return x.PID < y.PID
	})
}

func kindName(k bpfevict.EvictEvictKind) string {
	switch k {
	case bpfevict.EvictEvictKindEVICT_SYSCALL:
		return record.EvictSyscall
	case bpfevict.EvictEvictKindEVICT_DIRECT_RECLAIM:
		return record.EvictDirectReclaim
	case bpfevict.EvictEvictKindEVICT_MEMCG_RECLAIM:
		return record.EvictMemcgReclaim
	case bpfevict.EvictEvictKindEVICT_KSWAPD:
		return record.EvictKswapd
	case bpfevict.EvictEvictKindEVICT_KDAMOND:
		return record.EvictKdamond
	}
	return record.EvictKernel
}

// syscallName names the x86-64 syscalls that drop page-cache pages.
func syscallName(nr int32) string {
	switch nr {
	case -1:
		return ""
	case 221:
		return "fadvise64"
	case 28:
		return "madvise"
	case 76:
		return "truncate"
	case 77:
		return "ftruncate"
	case 87:
		return "unlink"
	case 263:
		return "unlinkat"
	case 285:
		return "fallocate"
	case 3:
		return "close"
	case 1:
		return "write" // e.g. to /proc/sys/vm/drop_caches
	case 60, 231:
		return "exit"
	}
	return fmt.Sprintf("syscall %d", nr)
}

// MemoryCgroup reads pid's memory cgroup from /proc/PID/cgroup: the v1
// memory hierarchy's path when there is one, else the v2 path, prefixed
// "v1:" or "v2:"; "" when unreadable.
func MemoryCgroup(pid int32) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	return parseMemoryCgroup(string(b))
}

func parseMemoryCgroup(text string) string {
	version, p := machine.MemoryCgroup(text)
	if version == 0 {
		return ""
	}
	return fmt.Sprintf("v%d:%s", version, p)
}
