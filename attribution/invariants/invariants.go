package invariants

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// The rules, as named in a Violation.
const (
	RuleWallSum      = "categories-sum-to-wall"
	RuleFillCPU      = "fill-cpu-within-fillers-cpu"
	RuleThreadTime   = "thread-time-is-lifetime"
	RuleFileIOWait   = "file-io-wait-within-total"
	RuleAccessedMiss = "accessed-at-least-missed"
	RuleDownloadTime = "download-time-within-wall"
	RuleDownloadSize = "download-at-least-min-bytes"
	RuleFillWait     = "fill-wait-within-off-cpu"
	RuleReread       = "reread-within-missed-and-evicted"
)

// ReadaheadSlackPages is how many pages a read-path file may have missed
// beyond those it accessed: readahead inserts pages ahead of the reader
// that it may never read (one synchronous and one asynchronous window, at
// most 2 MiB each with the largest read_ahead_kb a device advertises).
const ReadaheadSlackPages = 1024

// Violation is one broken invariant.
type Violation struct {
	Rule string
	// Subject names what broke it: "file 3 (/data/x.bin)", "thread
	// 812/813 (python3)", "run".
	Subject string
	Message string
}

func (v Violation) String() string { return v.Rule + ": " + v.Subject + ": " + v.Message }

// Check returns every violation in r, in rule order; none for a
// consistent record.
func Check(r *record.Record) []Violation {
	c := checker{r: r, interval: max(r.IntervalNS, 0)}
	c.wallSum()
	c.fillCPU()
	c.threadTime()
	c.fileIOWait()
	c.accessedMissed()
	c.downloads()
	c.fillWait()
	c.reread()
	c.story()
	return c.out
}

// Err is Check as one error listing every violation, or nil.
func Err(r *record.Record) error {
	vs := Check(r)
	if len(vs) == 0 {
		return nil
	}
	lines := make([]string, len(vs))
	for i, v := range vs {
		lines[i] = v.String()
	}
	return errors.New("record breaks its invariants:\n  " + strings.Join(lines, "\n  "))
}

type checker struct {
	r        *record.Record
	interval int64
	out      []Violation
}

func (c *checker) add(rule, subject, format string, a ...any) {
	c.out = append(c.out, Violation{Rule: rule, Subject: subject, Message: fmt.Sprintf(format, a...)})
}

func dur(ns int64) string { return time.Duration(ns).String() }

func fileSubject(f record.File) string { return fmt.Sprintf("file %d (%s)", f.ID, f.Name()) }

// wallSum: the breakdown partitions the wall time exactly.
func (c *checker) wallSum() {
	if c.r.WallNS < 0 {
		c.add(RuleWallSum, "run", "wall is %s: a run cannot end before it starts", dur(c.r.WallNS))
	}
	res := attribution.Analyze(c.r)
	var sum int64
	for _, row := range res.Breakdown {
		sum += row.NS
		if row.NS < 0 {
			c.add(RuleWallSum, "run", "category %s has negative time %s", row.Category, dur(row.NS))
		}
	}
	if sum != res.WallNS {
		c.add(RuleWallSum, "run", "categories sum to %s (%d ns), wall is %s (%d ns)", dur(sum), sum, dur(c.r.WallNS), c.r.WallNS)
	}
}

// fillCPU: a file's fill CPU is CPU time of the threads that filled it.
// The record does not say which threads filled which file; it says, per
// sample, which threads spent CPU filling the cache (MissCPUNS > 0) and
// which files were filled. So a file's fill CPU must fit in the CPU of
// the filling threads in the samples where the file was filled (one
// interval of slack for the skew between the file and thread counters,
// which are read one after the other), and in the whole-run CPU of every
// thread that filled anything (no slack: both are final totals).
func (c *checker) fillCPU() {
	r := c.r
	var fillersCPU int64
	for _, t := range r.Threads {
		if t.MissCPUNS > 0 {
			fillersCPU += t.CPUNS
		}
		if t.MissCPUNS > t.CPUNS {
			c.add(RuleFillCPU, fmt.Sprintf("thread %d/%d (%s)", t.PID, t.TID, t.Comm),
				"fill CPU %s exceeds the thread's CPU %s", dur(t.MissCPUNS), dur(t.CPUNS))
		}
	}
	inSamples := map[int]int64{} // file → CPU of filling threads in samples where it was filled
	sampled := map[int]bool{}
	for _, s := range r.Samples {
		var cpu int64
		for _, td := range s.Threads {
			if td.MissCPUNS > 0 {
				cpu += max(td.CPUNS, 0)
			}
		}
		for _, fd := range s.Files {
			if fd.MissCPUNS > 0 {
				inSamples[fd.File] += cpu
				sampled[fd.File] = true
			}
		}
	}
	for _, f := range r.Files {
		if f.MissCPUNS <= 0 {
			continue
		}
		if f.MissCPUNS > fillersCPU {
			c.add(RuleFillCPU, fileSubject(f), "fill CPU %s exceeds the %s of CPU of all threads that filled the page cache",
				dur(f.MissCPUNS), dur(fillersCPU))
		}
		if sampled[f.ID] && f.MissCPUNS > inSamples[f.ID]+c.interval {
			c.add(RuleFillCPU, fileSubject(f), "fill CPU %s exceeds the %s of CPU of the filling threads in the intervals it was filled (+%s slack)",
				dur(f.MissCPUNS), dur(inSamples[f.ID]), dur(c.interval))
		}
	}
}

// threadTime: a thread is on or off CPU for all of its life. The record
// keeps lifetimes per process, not per thread: a main thread (TID = PID)
// lives as long as its process; any other thread at most as long.
func (c *checker) threadTime() {
	r := c.r
	procs := map[int32]record.Process{}
	for _, p := range r.Processes {
		if _, dup := procs[p.PID]; !dup {
			procs[p.PID] = p
		}
	}
	for _, t := range r.Threads {
		p, ok := procs[t.PID]
		if !ok {
			continue
		}
		end := p.EndNS
		if end == 0 {
			// Still running when the run ended: traced until the final
			// poll, which is at most one interval after the exit.
			end = r.WallNS
		}
		life := end - max(p.StartNS, 0)
		total := t.CPUNS + t.OffCPUNS
		subject := fmt.Sprintf("thread %d/%d (%s)", t.PID, t.TID, t.Comm)
		switch {
		case total > life+c.interval:
			c.add(RuleThreadTime, subject, "on-CPU %s + off-CPU %s = %s exceeds its process's lifetime %s by more than an interval (%s)",
				dur(t.CPUNS), dur(t.OffCPUNS), dur(total), dur(life), dur(c.interval))
		case t.TID == t.PID && p.EndNS != 0 && total < life-c.interval:
			c.add(RuleThreadTime, subject, "on-CPU %s + off-CPU %s = %s falls short of its lifetime %s by more than an interval (%s)",
				dur(t.CPUNS), dur(t.OffCPUNS), dur(total), dur(life), dur(c.interval))
		}
	}
}

// fileIOWait: I/O wait charged to files is I/O wait of threads, and a
// file's direct-I/O wait is part of its I/O wait.
func (c *checker) fileIOWait() {
	var total, files int64
	for _, t := range c.r.Threads {
		total += t.IOWaitNS
	}
	for _, f := range c.r.Files {
		files += f.IOWaitNS
		if f.IOWaitNS > total {
			c.add(RuleFileIOWait, fileSubject(f), "I/O wait %s exceeds the run's total I/O wait %s", dur(f.IOWaitNS), dur(total))
		}
		if f.DirectWaitNS > f.IOWaitNS {
			c.add(RuleFileIOWait, fileSubject(f), "direct-I/O wait %s exceeds the file's I/O wait %s", dur(f.DirectWaitNS), dur(f.IOWaitNS))
		}
	}
	if files > total {
		c.add(RuleFileIOWait, "run", "the files' I/O wait sums to %s, more than the threads' total %s", dur(files), dur(total))
	}
}

// accessedMissed: a page read from disk for a read was also accessed by
// it. Read-path files are those the run accessed and did not write
// (written pages are created, not missed).
func (c *checker) accessedMissed() {
	for _, f := range c.r.Files {
		if f.PagesAccessed == 0 || f.PagesCreated > 0 {
			continue
		}
		// A page read ahead, evicted before it was read and read again
		// is missed twice for one access: re-reads add to the slack.
		if f.PagesMissed > f.PagesAccessed+f.PagesReread+ReadaheadSlackPages {
			c.add(RuleAccessedMiss, fileSubject(f), "%d pages missed but only %d accessed (readahead allows %d more, re-reads after eviction %d)",
				f.PagesMissed, f.PagesAccessed, ReadaheadSlackPages, f.PagesReread)
		}
	}
}

// fillWait: waits inside page-cache fills are off-CPU time that is not
// I/O wait (run queue and other blocking), and their run-queue part is
// run-queue time; the files' fill waits are the threads' (one interval of
// slack: file counters take a wait when it ends, thread counters as it
// goes).
func (c *checker) fillWait() {
	var total int64
	for _, t := range c.r.Threads {
		total += t.FillWaitNS
		subject := fmt.Sprintf("thread %d/%d (%s)", t.PID, t.TID, t.Comm)
		if t.FillWaitNS > t.OffCPUNS-t.IOWaitNS {
			c.add(RuleFillWait, subject, "fill wait %s exceeds the thread's off-CPU time %s less its I/O wait %s",
				dur(t.FillWaitNS), dur(t.OffCPUNS), dur(t.IOWaitNS))
		}
		if t.FillRunQueueNS > min(t.FillWaitNS, t.RunQueueNS) {
			c.add(RuleFillWait, subject, "fill run-queue wait %s exceeds its fill wait %s or run-queue wait %s",
				dur(t.FillRunQueueNS), dur(t.FillWaitNS), dur(t.RunQueueNS))
		}
	}
	var files int64
	for _, f := range c.r.Files {
		files += f.FillWaitNS
	}
	if files > total+c.interval {
		c.add(RuleFillWait, "run", "the files' fill wait sums to %s, more than the threads' %s (+%s slack)", dur(files), dur(total), dur(c.interval))
	}
}

// reread: a page is read again only after it was read and then evicted
// during the run; a page read while another process brought it in was
// accessed; the evictors account for at most the pages evicted.
func (c *checker) reread() {
	for _, f := range c.r.Files {
		if f.PagesReread > f.PagesMissed || f.PagesReread > f.PagesEvicted {
			c.add(RuleReread, fileSubject(f), "%d pages read again, but %d missed and %d evicted", f.PagesReread, f.PagesMissed, f.PagesEvicted)
		}
		if f.PagesShared > f.PagesAccessed {
			c.add(RuleReread, fileSubject(f), "%d pages read from another reader's fill, but only %d accessed", f.PagesShared, f.PagesAccessed)
		}
		var evicted uint64
		for _, e := range f.Evictors {
			evicted += e.Pages
		}
		if evicted > f.PagesEvicted {
			c.add(RuleReread, fileSubject(f), "evictors account for %d pages, but %d were evicted", evicted, f.PagesEvicted)
		}
	}
}

// downloads: a download is one by the shared definition (at least
// record.DownloadMinBytes), its span is a span inside the run (its last
// byte before the final poll, at most an interval after the exit), its
// polled bytes add up to its bytes, and the download row's time is at
// most the wall time its downloads were in flight.
func (c *checker) downloads() {
	r := c.r
	type span struct{ lo, hi int64 }
	var spans []span
	for i, d := range r.Downloads {
		subject := fmt.Sprintf("download %d (%s from %s)", i, d.Path, d.Peer)
		if d.Bytes < record.DownloadMinBytes {
			c.add(RuleDownloadSize, subject, "%d bytes received, under the %d a download needs", d.Bytes, record.DownloadMinBytes)
		}
		if d.EndNS < d.StartNS || d.EndNS > r.WallNS+c.interval {
			c.add(RuleDownloadTime, subject, "bytes from %s to %s: not a span within the run's %s (+%s)",
				dur(d.StartNS), dur(d.EndNS), dur(r.WallNS), dur(c.interval))
		}
		var polled uint64
		for _, s := range d.Samples {
			polled += s.Bytes
		}
		if len(d.Samples) > 0 && polled != d.Bytes {
			c.add(RuleDownloadTime, subject, "its samples sum to %d bytes, not its %d", polled, d.Bytes)
		}
		spans = append(spans, span{max(d.StartNS, 0), min(d.EndNS, r.WallNS)})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	var inFlight, end int64
	for _, s := range spans {
		lo := max(s.lo, end)
		if s.hi > lo {
			inFlight += s.hi - lo
		}
		end = max(end, s.hi)
	}
	res := attribution.Analyze(r)
	if row := res.Row(attribution.Download); row != nil && (row.NS > inFlight || row.NS > r.WallNS) {
		c.add(RuleDownloadTime, "run", "download time %s exceeds the %s downloads were in flight (wall %s)",
			dur(row.NS), dur(inFlight), dur(r.WallNS))
	}
}
