package gpu

import "github.com/coldtrace/coldtrace/record"

// Snapshot writes the samples taken so far into rec, a checkpoint;
// sampling goes on.
func (g *Sensor) Snapshot(rec *record.Record) error {
	rec.GPU = g.s.Result(rec.Start)
	return nil
}
