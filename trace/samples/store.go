// Package samples keeps a run's timeline samples in bounded memory. The
// first polls are kept as they came; after them, consecutive samples are
// summed into coarser ones, each covering twice as many polls whenever
// the coarse part fills up. An hour's run then costs what a few minutes'
// cost, the start (where a cold start's story is) keeps the poll's
// resolution, and every total stays exact: a merged sample's deltas are
// the sums of its polls'.
package samples

import (
	"slices"
	"sort"

	"github.com/coldtrace/coldtrace/record"
)

// Limits size a store. Entries are thread and file deltas: a poll may
// hold a few or thousands, so the count of samples alone bounds nothing.
type Limits struct {
	// HeadPolls and HeadEntries end the part kept as taken: at that many
	// polls or entries, whichever comes first.
	HeadPolls, HeadEntries int
	// TailSamples and TailEntries are what the coarse part may hold
	// before it is halved.
	TailSamples, TailEntries int
}

// DefaultLimits: the first 600 polls (a minute at the default 100 ms)
// as taken, up to 128 Ki entries; then at most 1,200 coarse samples (an
// hour at the default interval is 1,106 samples of 3.2 s) or 64 Ki
// entries, whichever fills first. Packed, an entry is 6–16 bytes (56–64
// as a struct): about 1.3 and 0.7 MiB.
func DefaultLimits() Limits {
	return Limits{HeadPolls: 600, HeadEntries: 128 << 10, TailSamples: 1200, TailEntries: 64 << 10}
}

// minTail is the fewest coarse samples merging goes down to (fewer when
// the tail's limit is smaller).
const minTail = 8

// maxStride bounds the polls per coarse sample (marks at every poll
// coarsen often without making samples longer).
const maxStride = 1 << 20

// Store holds the samples. Samples it returned are never written again
// (a merge builds new slices), so a checkpoint can encode them while the
// run goes on.
type Store struct {
	lim Limits

	kept []packed // head, then the coarse tail
	// head is the length of the part kept as taken; headDone once it
	// stopped growing.
	head        int
	headEntries int
	headDone    bool
	tailEntries int
	entryLimit  int // TailEntries, raised where files do not recur
	pend        sum // polls summed toward the next coarse sample
	pendN       int
	// stride is how many polls make one coarse sample.
	stride int
	polls  int
	// marks are the times whose neighbourhood keeps its resolution when
	// the tail is coarsened (a server's segment boundaries).
	marks []int64
	last  record.Sample
}

// New returns a store within lim (a tail of at least 2 samples).
func New(lim Limits) *Store {
	lim.TailSamples = max(lim.TailSamples, 2)
	return &Store{lim: lim, stride: 1, entryLimit: lim.TailEntries}
}

func entries(smp record.Sample) int { return len(smp.Threads) + len(smp.Files) }

// Add appends one poll's sample. Samples must come in time order.
func (s *Store) Add(smp record.Sample) {
	from := s.last.EndNS
	s.polls++
	s.last = smp
	if !s.headDone {
		n := entries(smp)
		if s.head < s.lim.HeadPolls && s.headEntries+n <= s.lim.HeadEntries {
			s.kept = append(s.kept, pack(smp))
			s.head++
			s.headEntries += n
			return
		}
		s.headDone = true
	}
	if s.marked(from, smp.EndNS) {
		// The poll holding a mark stays one poll; what was summed so far
		// ends before it.
		s.flush()
		s.push(smp)
		return
	}
	s.pend.add(smp)
	s.pendN++
	if s.pendN >= s.stride {
		s.flush()
	}
}

// flush ends the coarse sample being summed.
func (s *Store) flush() {
	if s.pendN == 0 {
		return
	}
	p := s.pend.take()
	s.pendN = 0
	s.push(p)
}

func (s *Store) push(smp record.Sample) {
	s.kept = append(s.kept, pack(smp))
	s.tailEntries += entries(smp)
	if s.over(1) {
		s.coarsen()
	}
}

// over says whether the tail holds at least share of a limit.
func (s *Store) over(share float64) bool {
	return float64(len(s.kept)-s.head) >= share*float64(s.lim.TailSamples) ||
		float64(s.tailEntries) >= share*float64(s.entryLimit)
}

// Closes says whether a poll ending at end would close a sample of its
// own (or the coarse sample being summed): while the head lasts, at a
// mark, and at every stride-th poll after. A sensor whose counters are
// cumulative need only be read then.
func (s *Store) Closes(end int64) bool {
	return !s.headDone || s.stride == 1 || s.pendN+1 >= s.stride || s.marked(s.last.EndNS, end)
}

// Mark asks that the samples around at keep their resolution while they
// can: a segment cut there then splits no coarse sample. Marks come in
// time order.
func (s *Store) Mark(at int64) {
	s.marks = append(s.marks, at)
}

// coarsen merges neighbours in the tail until it is under three
// quarters of its limits, doubling the polls per sample each time. A
// pair is left apart when a mark falls in either of its samples, unless
// that leaves the tail over three quarters full (marks at every poll
// must not make the memory unbounded). Merging shrinks the entries only
// where the same threads and files recur; files each read once (a
// dataset's) stay one entry each however coarse the samples. So it stops
// at minTail samples, and the entry limit rises to twice what is held:
// the tail then costs at most 2×minTail times the run's file table (once
// when files are not read again), and the next coarsening waits for it
// to double.
func (s *Store) coarsen() {
	floor := min(minTail, s.lim.TailSamples/2)
	for s.over(0.75) && len(s.kept)-s.head > floor {
		tail := s.kept[s.head:]
		merged := s.halve(tail, true)
		if len(merged) == len(tail) || len(merged) > s.lim.TailSamples*3/4 {
			merged = s.halve(tail, false)
		}
		// A new array: the old one may be held by a checkpoint being
		// written.
		s.kept = append(slices.Clip(s.kept[:s.head]), merged...)
		s.tailEntries = 0
		for _, m := range merged {
			s.tailEntries += m.entries()
		}
		if s.stride < maxStride {
			s.stride *= 2
		}
	}
	if 4*s.tailEntries >= 3*s.entryLimit {
		s.entryLimit = 2 * s.tailEntries
	}
}

func (s *Store) halve(tail []packed, keepMarks bool) []packed {
	out := make([]packed, 0, len(tail)/2+1)
	var a, b record.Sample // decoded pairs, their room reused
	for i := 0; i < len(tail); {
		if i+1 == len(tail) {
			out = append(out, tail[i])
			break
		}
		if keepMarks && s.marked(s.startOf(tail, i), tail[i+1].end) {
			out = append(out, tail[i])
			i++
			continue
		}
		unpack(tail[i], &a)
		unpack(tail[i+1], &b)
		out = append(out, pack(Merge(a, b)))
		i += 2
	}
	return out
}

// startOf is where tail[i] begins: the end of the sample before it.
func (s *Store) startOf(tail []packed, i int) int64 {
	if i > 0 {
		return tail[i-1].end
	}
	if s.head > 0 {
		return s.kept[s.head-1].end
	}
	return 0
}

// marked says whether a mark falls in (from, to]. Marks come in time
// order.
func (s *Store) marked(from, to int64) bool {
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i] > from })
	return i < len(s.marks) && s.marks[i] <= to
}

// Samples returns the samples so far, the polls not yet summed into a
// coarse sample included, decoded into slices of their own.
func (s *Store) Samples() []record.Sample {
	return s.View().Samples()
}

// View is the samples a store held when it was taken. The store never
// writes what a view holds, so a checkpoint can read one on its own
// goroutine while the run goes on.
type View struct {
	kept []packed
	pend *record.Sample // the polls not yet summed into a coarse sample
}

// View returns the samples so far, the polls being summed included.
func (s *Store) View() View {
	v := View{kept: slices.Clip(s.kept)}
	if s.pendN > 0 {
		p := s.pend.clone()
		v.pend = &p
	}
	return v
}

// Len is how many samples the view holds.
func (v View) Len() int {
	if v.pend != nil {
		return len(v.kept) + 1
	}
	return len(v.kept)
}

// Each calls yield with each sample in time order, decoded into one
// sample whose slices are reused: valid only until yield returns. It
// stops at yield's first error.
func (v View) Each(yield func(*record.Sample) error) error {
	var smp record.Sample
	for _, p := range v.kept {
		unpack(p, &smp)
		if err := yield(&smp); err != nil {
			return err
		}
	}
	if v.pend != nil {
		return yield(v.pend)
	}
	return nil
}

// Samples decodes the view's samples into slices of their own.
func (v View) Samples() []record.Sample {
	out := make([]record.Sample, 0, v.Len())
	for _, p := range v.kept {
		out = append(out, unpacked(p))
	}
	if v.pend != nil {
		out = append(out, *v.pend)
	}
	return out
}

// Last is the latest poll's sample as taken, and whether there was one.
func (s *Store) Last() (record.Sample, bool) {
	return s.last, s.polls > 0
}

// Coarsening says where the samples stop being one poll each; nil while
// every sample is one poll.
func (s *Store) Coarsening() *record.Coarsening {
	if s.stride == 1 {
		return nil
	}
	c := &record.Coarsening{PollsPerSample: s.stride, Polls: s.polls}
	if s.head > 0 {
		c.FromNS = s.kept[s.head-1].end
	}
	return c
}

// sum adds polls into one sample in place: the sample is private until
// take hands it out.
type sum struct {
	s       record.Sample
	threads map[int32]int // TID → index in s.Threads
	files   map[int]int   // File → index in s.Files
}

func (u *sum) add(smp record.Sample) {
	if u.threads == nil {
		u.threads, u.files = map[int32]int{}, map[int]int{}
	}
	if u.s.Threads == nil && u.s.Files == nil {
		// As much room as the last sum took.
		u.s.Threads = make([]record.ThreadDelta, 0, len(u.threads))
		u.s.Files = make([]record.FileDelta, 0, len(u.files))
		clear(u.threads)
		clear(u.files)
	}
	u.s.EndNS = max(u.s.EndNS, smp.EndNS)
	for _, td := range smp.Threads {
		if i, ok := u.threads[td.TID]; ok {
			addThread(&u.s.Threads[i], td)
			continue
		}
		u.threads[td.TID] = len(u.s.Threads)
		u.s.Threads = append(u.s.Threads, td)
	}
	for _, fd := range smp.Files {
		if i, ok := u.files[fd.File]; ok {
			addFile(&u.s.Files[i], fd)
			continue
		}
		u.files[fd.File] = len(u.s.Files)
		u.s.Files = append(u.s.Files, fd)
	}
}

// take returns the sum and starts a new one; the slices returned are
// never written again.
func (u *sum) take() record.Sample {
	out := u.s
	u.s = record.Sample{}
	// The maps are cleared at the next add, after their sizes gave the
	// new slices their room.
	return out
}

func (u *sum) clone() record.Sample {
	return record.Sample{EndNS: u.s.EndNS, Threads: slices.Clone(u.s.Threads), Files: slices.Clone(u.s.Files)}
}

// Merge is the sample of a's and b's intervals together: b's end, and per
// thread and per file the sums of their deltas, in order of first
// appearance. Neither argument's slices are written.
func Merge(a, b record.Sample) record.Sample {
	var u sum
	u.add(a)
	u.add(b)
	return u.take()
}

func addThread(t *record.ThreadDelta, d record.ThreadDelta) {
	t.CPUNS += d.CPUNS
	t.IOWaitNS += d.IOWaitNS
	t.MissCPUNS += d.MissCPUNS
	t.RunQueueNS += d.RunQueueNS
	t.OtherWaitNS += d.OtherWaitNS
	t.FillWaitNS += d.FillWaitNS
	t.FillRunQueueNS += d.FillRunQueueNS
}

func addFile(f *record.FileDelta, d record.FileDelta) {
	f.PagesAccessed += d.PagesAccessed
	f.PagesMissed += d.PagesMissed
	f.PagesEvicted += d.PagesEvicted
	f.IOWaitNS += d.IOWaitNS
	f.MissCPUNS += d.MissCPUNS
	f.FillWaitNS += d.FillWaitNS
	f.DirectWaitNS += d.DirectWaitNS
	f.PagesCreated += d.PagesCreated
	f.Stacks = MergeStacks(f.Stacks, d.Stacks)
}

// MergeStacks sums two intervals' stacks of one file into a new slice,
// most time first, at most record.MaxSampleStacks (the runners-up past
// it are dropped: a slice names only the first).
func MergeStacks(a, b []record.SampleStack) []record.SampleStack {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]record.SampleStack, 0, len(a)+len(b))
	out = append(out, a...)
	for _, st := range b {
		i := slices.IndexFunc(out, func(o record.SampleStack) bool { return o.N == st.N })
		if i < 0 {
			out = append(out, st)
			continue
		}
		out[i].NS += st.NS
	}
	record.SortSampleStacks(out)
	if len(out) > record.MaxSampleStacks {
		out = out[:record.MaxSampleStacks:record.MaxSampleStacks]
	}
	return out
}
