package trace

import (
	"github.com/cilium/ebpf"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	bpfevict "github.com/coldtrace/coldtrace/bpf/evict"
	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	bpfpy "github.com/coldtrace/coldtrace/bpf/pystack"
	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/trace/download"
	"github.com/coldtrace/coldtrace/trace/evict"
	"github.com/coldtrace/coldtrace/trace/gpu"
	"github.com/coldtrace/coldtrace/trace/jit"
	"github.com/coldtrace/coldtrace/trace/machine"
	"github.com/coldtrace/coldtrace/trace/pagecache"
	"github.com/coldtrace/coldtrace/trace/pystack"
	"github.com/coldtrace/coldtrace/trace/sched"
	"github.com/coldtrace/coldtrace/trace/uprobes"
)

// SensorSpec is one row of the table of sensors (Sensors): what a sensor
// is, what its BPF object shares with the others', and what a report
// lacks without it. The session orders its sensors by the table and the
// doctor checks every object in it; the session's loader makes each
// row's sensor in a lane of its own, after the rows whose maps it takes.
// A test holds the shared maps to the objects themselves.
type SensorSpec struct {
	// Name is how the doctor's checks and the docs name the sensor.
	Name string
	// Package is the sensor's package under the module.
	Package string
	// Object is the sensor's BPF object spec (bpf2go's loader); nil for a
	// sensor without one (procfs, NVML).
	Object func() (*ebpf.CollectionSpec, error)
	// Creates are the maps its object makes that later objects take
	// (their MapReplacements); Takes are those it takes from an earlier
	// row's object. The loader makes a row's maps before any object
	// that takes them loads; objects otherwise load in lanes at once.
	Creates, Takes []string
	// Lazy says what the sensor attaches only once it is needed, if
	// anything.
	Lazy string
	// Lacks is what a report lacks without the sensor.
	Lacks string
	// Optional sensors that cannot load cost the run their part, not the
	// run (a note instead of an error).
	Optional bool
	// PathSyscalls: the object's syscalls:* programs attach to each of
	// jit.PathSyscalls, not to the one their section names.
	PathSyscalls bool
	// Uprobes: the sensor makes uprobes through the uprobe links' owner;
	// the gated command is covered by their links once every such row
	// is loaded, while the other rows still load.
	Uprobes bool
	// is reports whether a loaded sensor is this row's.
	is func(Sensor) bool
	// off says whether the options turn the sensor off (nil: never).
	off func(Options) bool
	// make makes the sensor from the maps it takes (loader): the maps it
	// creates exist when it returns; start, when not nil, then loads its
	// programs in the row's lane.
	make func(l *loader, taken map[string]*ebpf.Map) (sn Sensor, start func() error, err error)
	// link, when not nil, joins the loaded sensors once every row is
	// loaded, in the table's order.
	link func(l *loader) error
}

// isA is a SensorSpec.is for the sensor type T.
func isA[T Sensor](s Sensor) bool {
	_, ok := s.(T)
	return ok
}

// The maps the scheduler and the stack walker make for the others.
var (
	schedShared = []string{bpfsched.SchedMapTaskStates, bpfsched.SchedMapThreads, bpfsched.SchedMapFiles,
		bpfsched.SchedMapRunPages, bpfsched.SchedMapFileStacks, bpfsched.SchedMapTrackedTgids}
	trackedSet = []string{bpfsched.SchedMapTaskStates, bpfsched.SchedMapThreads, bpfsched.SchedMapTrackedTgids}
	walkerMaps = []string{bpfpy.PystackMapPyConfs, bpfpy.PystackMapPyStacks, bpfpy.PystackMapPyScratch, bpfpy.PystackMapPyEvents, bpfpy.PystackMapPyLost,
		bpfpy.PystackMapPyNatives}
	walkerTaken = append(append([]string(nil), trackedSet...), walkerMaps...)
)

// Sensors is the table of sensors in the session's order: loaded in
// lanes by it (loader: a row's lane waits for the maps it takes), then polled, finished and checkpointed in
// this order (a row reads what the rows above it wrote: the scheduler's
// processes, the page cache's files), and closed in reverse.
func Sensors() []SensorSpec {
	return []SensorSpec{
		{Name: "scheduler", Package: "trace/sched", Object: bpfsched.LoadSched, Creates: schedShared,
			Lacks: "everything: coldtrace cannot follow the command", is: isA[*sched.Sensor], make: makeSched},
		{Name: "Python stacks", Package: "trace/pystack", Object: bpfpy.LoadPystack, Creates: walkerMaps, Takes: trackedSet,
			Lacks: "Python stacks of reads, compiles and downloads", Optional: true, is: isA[*pystack.Sensor],
			off: func(o Options) bool { return o.NoStacks }, make: makeStacks},
		{Name: "page cache", Package: "trace/pagecache", Object: bpfpc.LoadPagecache,
			Takes: append(append([]string(nil), schedShared...), walkerMaps...),
			Lacks: "page-cache misses, hits and disk-read time", is: isA[*pagecache.Sensor], make: makePagecache, link: chainInsertions},
		{Name: "eviction", Package: "trace/evict", Object: bpfevict.LoadEvict, Takes: schedShared,
			Lazy:  "its insertion program runs chained from the page cache's",
			Lacks: "evictions during the run and who made them (re-reads, thrashing)", is: isA[*evict.Sensor], make: makeEvict},
		{Name: "machine", Package: "trace/machine",
			Lacks: "memory, memory cgroups and limits, other processes' CPU, steal time", is: isA[*machine.Sensor], make: makeMachine},
		{Name: "JIT", Package: "trace/jit", Object: bpfjit.LoadJit, Takes: walkerTaken, PathSyscalls: true, Uprobes: true,
			Lazy:  "the path-syscall probes, once a process uses a framework with a kernel cache",
			Lacks: "compiles and kernel-cache hits and misses", is: isA[*jit.Sensor],
			off: func(o Options) bool { return o.NoJIT }, make: makeJIT, link: jitSees},
		{Name: "download", Package: "trace/download", Object: bpfdl.LoadDownload, Takes: walkerTaken, Uprobes: true,
			Lazy:  "the tmpfs write probes, once a connection shaped like a download received 1 MiB",
			Lacks: "downloads", is: isA[*download.Sensor],
			off: func(o Options) bool { return o.NoNetwork }, make: makeDownload},
		{Name: "uprobe links", Package: "trace/uprobes",
			Lazy:  "a process's links, once it maps a probed library",
			Lacks: "in-process compile times and download host names", is: isA[*uprobes.Scoper], make: makeUprobes},
		{Name: "GPU", Package: "trace/gpu", Lazy: "samples on its own period, from a goroutine of its own",
			Lacks: "GPU compute time, utilisation and VRAM", Optional: true, is: isA[*gpu.Sensor],
			off: func(o Options) bool { return o.NoGPU }, make: makeGPU},
	}
}
