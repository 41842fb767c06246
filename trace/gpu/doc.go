// Package gpu samples NVIDIA GPUs through NVML while a command is traced:
// per device utilization, memory, SM clock and power; per process the GPU
// memory and utilization of the traced processes; and the GPU processes
// that were not traced (interference).
//
// NVML is loaded at run time (github.com/NVIDIA/go-nvml). Without a GPU, a
// driver or libnvidia-ml.so.1 the sampler is unavailable: it says "no
// NVIDIA GPU (…)" once and does nothing else. Fields a GPU does not support
// are absent from its samples; the rest goes on.
//
// A long run is held in bounded memory (series.go): each device's first
// polls as taken, then coarse samples that sum twice as many polls each
// time their part fills, with the sums that keep the record's GPU
// summaries exact.
//
// The usual life:
//
//	s := gpu.Open(nvml.New(), gpu.Options{Traced: tracer.IsTraced})
//	defer s.Close()
//	s.Start(ctx) // baseline sample now, then one every Interval
//	… run the command …
//	s.Stop() // final sample
//	rec.GPU = s.Result(rec.Start)
//
// Sensor wraps a Sampler as one of the run session's sensors.
package gpu
