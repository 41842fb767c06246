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

// New opens NVML through opts.NVML and starts sampling until Finish or
// Close. A machine without NVML is no error: the sensor then samples
// nothing and the record says why (record.GPU.Unavailable).
func New(opts Options) (*Sensor, error) {
	lib := opts.NVML
	if lib == nil {
		lib = nvml.New()
	}
	s := Open(lib, opts)
	s.Start(context.Background())
	return &Sensor{s: s}, nil
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
