package trace

import "github.com/coldtrace/coldtrace/record"

// Sensor is what every sensor package gives the session (the table of
// them is Sensors). Each package makes its sensor one way, New(Options)
// (*Sensor, error), loaded and attached before the command is released;
// those whose maps others take before their programs load (the
// scheduler, the stack walker) or that load in a lane of their own (the
// network sensor) split it into Prepare(Options) and Start. The session
// then calls:
type Sensor interface {
	// Begin once the command is released, with the CLOCK_MONOTONIC time
	// (ns) the run's times count from.
	Begin(startMono uint64)
	// Poll every interval and once after the command exited, in the order
	// the sensors were loaded: add this sensor's deltas up to now to the
	// sample.
	Poll(now uint64, s *record.Sample) error
	// Finish once, after the last poll, in load order: drain what the
	// kernel queued and write this sensor's part of the record (the
	// scheduler's processes come first; later sensors may read them).
	Finish(rec *record.Record) error
	// Snapshot writes this sensor's part of a checkpoint, a record of the
	// run so far, while the run goes on. It is called on the session's
	// goroutine between polls, in load order (the scheduler's processes
	// and the page cache's files first; later sensors add to them), and
	// must not block on the kernel or on another goroutine's slow work:
	// a checkpoint must never hold up the polls. A sensor whose data
	// cannot be taken that cheaply says so in its Snapshot, which then
	// adds nothing: its part is in the final record only.
	Snapshot(rec *record.Record) error
	// Close releases probes, maps and goroutines; it runs on every path.
	Close() error
}

// LazyPoller is a sensor whose Poll the session skips while the timeline
// sums several polls into one sample (past a long run's first minute,
// trace/samples): its deltas come from cumulative counters, so the poll
// that closes the sample carries the skipped polls' too, and the sums
// stay exact. The page cache's file table is one: a walk of its hash map
// visits every bucket, half a millisecond a poll however few files
// changed, which was half of coldtrace's CPU in a long run.
type LazyPoller interface {
	PollsLazily()
}
