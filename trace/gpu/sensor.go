package gpu

import (
	"context"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/coldtrace/coldtrace/record"
)

// Sensor is the Sampler as one of the run session's sensors: it samples
// from its own goroutine from Start to Finish.
type Sensor struct {
	s *Sampler
}

// StartSensor opens NVML through lib and starts sampling.
func StartSensor(ctx context.Context, lib nvml.Interface, opts Options) *Sensor {
	s := Open(lib, opts)
	s.Start(ctx)
	return &Sensor{s: s}
}

// Begin is part of the session's sensor interface: samples carry wall
// clock times.
func (g *Sensor) Begin(uint64) {}

// Poll is part of the session's sensor interface: the sampler polls on
// its own period.
func (g *Sensor) Poll(uint64, *record.Sample) error { return nil }

// Finish takes the final sample and writes the GPU section.
func (g *Sensor) Finish(rec *record.Record) error {
	g.s.Stop()
	rec.GPU = g.s.Result(rec.Start)
	return nil
}

// Close releases NVML.
func (g *Sensor) Close() error { return g.s.Close() }
