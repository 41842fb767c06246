package trace

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coldtrace/coldtrace/record"
)

// checkpoints writes checkpoints on a goroutine of their own, one at a
// time: a slow disk delays the next checkpoint, never a poll.
type checkpoints struct {
	write  func(*record.Record) error
	every  time.Duration
	ticker *time.Ticker
	busy   atomic.Bool // a write is running
	wg     sync.WaitGroup

	mu     sync.Mutex
	taken  int
	failed int
	first  error
}

func newCheckpoints(write func(*record.Record) error, every time.Duration) *checkpoints {
	if write == nil || every <= 0 {
		return nil
	}
	return &checkpoints{write: write, every: every, ticker: time.NewTicker(every)}
}

// tick is the ticker's channel; nil (never ready) when checkpoints are
// off.
func (c *checkpoints) tick() <-chan time.Time {
	if c == nil {
		return nil
	}
	return c.ticker.C
}

// checkpoint builds a checkpoint from what the sensors gathered up to the
// last poll and hands it to the writer, unless the previous write is
// still running.
func (s *session) checkpoint() {
	c := s.ckpt
	if !c.busy.CompareAndSwap(false, true) {
		return
	}
	rec := s.snapshot()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.write(rec)
		c.mu.Lock()
		c.taken++
		if err != nil {
			c.failed++
			if c.first == nil {
				c.first = err
			}
		}
		c.mu.Unlock()
		c.busy.Store(false)
	}()
}

// stop waits for the write in flight and returns a warning for the
// record when checkpoints failed.
func (c *checkpoints) stop() string {
	if c == nil {
		return ""
	}
	c.ticker.Stop()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == 0 {
		return ""
	}
	return fmt.Sprintf("checkpoint: %d of %d checkpoints could not be written (first: %v)", c.failed, c.taken, c.first)
}

// snapshot is the record of the run up to the last poll, marked partial.
// Its samples are a view of the session's store, which never writes what
// a view holds.
func (s *session) snapshot() *record.Record {
	rec := *s.rec
	var at int64
	if last, ok := s.timeline.Last(); ok {
		at = last.EndNS
	}
	rec.WallNS = at
	rec.Partial = &record.Partial{AtNS: at, Reason: fmt.Sprintf(
		"checkpoint written every %v while the command ran; coldtrace did not finish the run", s.ckpt.every)}
	// Streamed by the encoder, packed until then: decoded all at once, a
	// long run's timeline was megabytes of heap every minute.
	rec.Samples, rec.SampleStream = nil, s.timeline.View()
	rec.Coarsened = s.timeline.Coarsening()
	rec.Warnings = slices.Clone(s.rec.Warnings)
	if s.pollErr != nil {
		rec.Warnings = append(rec.Warnings, s.pollErr.Error())
	}
	for _, sn := range s.sensors {
		if err := sn.Snapshot(&rec); err != nil {
			rec.Warnings = append(rec.Warnings, err.Error())
		}
	}
	rec.Self = selfCost(rec.Self)
	return &rec
}
