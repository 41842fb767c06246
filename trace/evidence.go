package trace

import (
	"context"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/cilium/ebpf"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/gpu"
)

// evidence is a source that runs beside the core probes for the length of
// a run (the GPU sampler, the JIT and cache tracer) and adds its own
// section to the record.
type evidence interface {
	// start runs after the core probes are attached, before the command
	// is released.
	start(env *runEnv) error
	// finish runs after the command exited and the record's processes,
	// threads and files are filled in.
	finish(rec *record.Record)
	close() error
}

// runEnv is what an evidence source may use from the core tracer.
type runEnv struct {
	ctx context.Context
	// threads (the per-thread counters, by slot) and taskStates (task
	// storage, present for tracked threads: the tracked set) are the
	// core's; BPF objects of other sources take them as map replacements.
	threads    *ebpf.Map
	taskStates *ebpf.Map
	// startMono returns the monotonic time (ns) the command was released,
	// 0 before that.
	startMono func() uint64
	tracked   *pidSet
	opts      *Options
}

// pidSet is the set of every process that was part of the run, safe to
// read from other goroutines.
type pidSet struct {
	mu   sync.RWMutex
	pids map[int32]struct{}
}

func newPidSet() *pidSet { return &pidSet{pids: map[int32]struct{}{}} }

func (s *pidSet) add(pid int32) {
	s.mu.Lock()
	s.pids[pid] = struct{}{}
	s.mu.Unlock()
}

func (s *pidSet) has(pid int32) bool {
	s.mu.RLock()
	_, ok := s.pids[pid]
	s.mu.RUnlock()
	return ok
}

// gpuEvidence samples NVML through the run.
type gpuEvidence struct {
	s *gpu.Sampler
}

func (g *gpuEvidence) start(env *runEnv) error {
	g.s = gpu.Open(nvml.New(), gpu.Options{Interval: env.opts.GPUInterval, Traced: env.tracked.has})
	g.s.Start(env.ctx)
	return nil
}

func (g *gpuEvidence) finish(rec *record.Record) {
	g.s.Stop()
	rec.GPU = g.s.Result(rec.Start)
}

func (g *gpuEvidence) close() error {
	if g.s == nil {
		return nil
	}
	return g.s.Close()
}
