package pagecache

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/internal/filehandle"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// SmallFilesPath names the small files' row in records: files under
// SMALL_FILE_BYTES (bpf/pagecache) that were only read from the page
// cache are counted together, without an entry each.
const SmallFilesPath = "[small files (<256 KiB), cache hits only]"

// DirectUnknownFormat names the row of a process's direct reads of a
// device that no file names (a driver's own direct I/O, an asynchronous
// read of a raw device): its PID, then the device's major and minor.
const DirectUnknownFormat = "[direct I/O, file unknown: process %d on device %d:%d]"

// unknownDirect marks those rows' keys (UNKNOWN_DIRECT in bpf/pagecache):
// the inode number is the process's PID with this bit set.
const unknownDirect = 1 << 63

// smallFiles is their key. No file has inode 0.
var smallFiles = probe.FileKey{}

// The reader looks for path records every drainPeriod while they come,
// slowing to idleDrain while the ring stays empty (its wake-ups were
// half of coldtrace's CPU under an idle command). A path record (a
// library mapped) can be what attaches the JIT sensor's path probes, and
// every 50 ms of delay is lookups not seen: the probes wake the reader
// for a path record at most every 50 ms (path_wakeup in
// bpf/pagecache), so the first after a quiet spell is read at once and
// the rest within drainPeriod.
const (
	drainPeriod = 50 * time.Millisecond
	idleDrain   = 400 * time.Millisecond
)

type fileTimes struct {
	accessed, missed, evicted, created uint64
	io, miss                           int64
	reread, shared                     uint64
	fillWait                           int64
	directBytes                        uint64
	directWait                         int64
}

// polledFile is one file table entry as a poll read it.
type polledFile struct {
	key   probe.FileKey
	stats bpfpc.PagecacheFileStats
}

type fileAcc struct {
	id    int
	key   probe.FileKey
	lastP int32 // last process that touched it, for /proc lookups
	prev  fileTimes
}

// Options connect the sensor to the rest of the run.
type Options struct {
	// Shared are the scheduler object's maps by name (sched.Shared's
	// Replacements).
	Shared map[string]*ebpf.Map
	// Waiting returns, after each poll has read the file counters, the
	// I/O waits and fill waits of ongoing off-CPU intervals by file that
	// those counters cannot hold yet (sched.Sensor.Waiting, polled first).
	Waiting func() (io, fill map[probe.FileKey]int64)
	// FileSeen, when set, is told the path of each file the first time
	// the run reads, maps or writes it, and of each Python process's first
	// read of a .py or .pyc file. It is called from the reader goroutine.
	FileSeen func(probe.FileSeen)
	// BTF, when set, is the kernel BTF cache shared with the other
	// sensors' loads: decoded once per run.
	BTF *btf.Cache
	// Stacks are the Python stack walker's maps by name
	// (pystack.Sensor.Replacements): fills of Python threads take their
	// stacks with it. Nil: no stacks (the object's own maps stay empty).
	Stacks map[string]*ebpf.Map
	// InternStack, when set, names a Python stack id of the kernel's
	// (bpf/include/pywalk.h) in the record: 1 + its index in
	// record.Stacks, 0 when unknown (pystack.Sensor.Intern).
	InternStack func(*record.Record, uint64) int
	// StackPID is the process a stack id was walked in
	// (pystack.Sensor.PIDOf).
	StackPID func(uint64) int32
	// MountInfo is the mount table to resolve paths with
	// (/proc/self/mountinfo when empty).
	MountInfo string
	// NoReadExits keeps the read family's syscall exit tracepoints off
	// where the kernel refuses task works (which is when they would end
	// reads' fills): with any syscall tracepoint attached every task of
	// the machine takes the syscall slow path. Reads' fills then end at
	// the next look at the thread, without their last copy's CPU.
	NoReadExits bool
}

// Sensor is the loaded page-cache sensor.
type Sensor struct {
	p    *probes
	ring *probe.Ring
	opts Options

	mu     sync.Mutex
	mounts mountTable
	// mountsReread is set once the mount table was read again at the end.
	mountsReread bool
	files        map[probe.FileKey]*fileAcc
	fileOrder    []*fileAcc
	fsPaths      map[probe.FileKey]string
	// cutPaths are the files whose walk was cut (a path over PATH_MAX):
	// their fsPaths entry is the tail of the path only.
	cutPaths map[probe.FileKey]bool
	seen     uint64
	// startMono is the run's start (Begin); Finish reads it under mu,
	// which Begin does not take.
	startMono atomic.Uint64

	// ns resolves paths in other mount namespaces.
	ns nsPaths
	// nsSeen is the path of a file as the process that first touched it
	// saw it, resolved when its path arrived: a child in its own mount
	// namespace (a bind mount) is often gone by the end of the run.
	nsSeen map[probe.FileKey]string
	// nsView is the path a process of another mount namespace used for
	// a file, walked through its mounts by the kernel side at its first
	// touch (PATH_VIEW): exact whenever the namespace is gone or its
	// mounts have changed by the time user space could read them.
	nsView map[probe.FileKey]string
	// handles follow the files the run created across renames
	// (finalnames.go).
	handles *filehandle.Store
	// loaded is when the sensor was loaded: a file born after it was
	// created by the run (or beside it), even when the run's first touch
	// of it was a read (as(1) reads its fresh output back before writing
	// it), and gets a handle that finds it after a rename.
	loaded time.Time
	// born says, per file, whether it was born after the sensor loaded
	// (statx btime, when its path first arrived): a file the run created
	// has nothing on disk but what the run wrote, so a page it reads
	// that was not cached, other than one evicted during the run, is a
	// hole the filesystem filled with zeros, not a read from disk (as(1)
	// seeks past the end and reads back the pages between).
	born map[probe.FileKey]bool
	// sightTS is when each file's path record was made (its first
	// sight by the kernel side, CLOCK_MONOTONIC ns): which of two files
	// with one inode number came later (reused).
	sightTS map[probe.FileKey]uint64
	// byIno is the run's directories' files by inode, read once at the
	// end when a renamed file had no handle (scannedName).
	byIno   map[uint64][]string
	scanned map[string]bool

	fileKeyBuf []bpfpc.PagecacheFileKey
	fileBuf    []bpfpc.PagecacheFileStats
	polled     []polledFile
	stackKeys  []bpfpc.PagecacheFileStackKey
	stackVals  []bpfpc.PagecacheFileStackStats
	// stacks are the files' stack charges as of the last poll.
	stacks sampleStacks
}

// New reads the mount table, loads and attaches the page-cache probes.
func New(opts Options) (*Sensor, error) {
	if opts.MountInfo == "" {
		opts.MountInfo = "/proc/self/mountinfo"
	}
	mounts, err := readMountTable(opts.MountInfo)
	if err != nil {
		return nil, err
	}
	p, err := load(opts.Shared, opts.Stacks, opts.BTF)
	if err != nil {
		return nil, err
	}
	opts.BTF = nil // not held past the load (see evict.New)
	// The map holds 256 devices: a device past them is named as the
	// mount table's canonical mount shows it.
	devs := mounts.boundTwice()
	for _, dev := range devs[:min(len(devs), int(p.objs.BindDevs.MaxEntries()))] {
		if err := p.objs.BindDevs.Update(dev, uint8(1), ebpf.UpdateAny); err != nil {
			p.close()
			return nil, fmt.Errorf("note the bind-mounted devices: %w", err)
		}
	}
	s := newSensor(p, mounts, opts)
	if err := p.attach(opts.NoReadExits); err != nil {
		p.close()
		return nil, err
	}
	if s.ring, err = probe.StartRing(p.objs.Paths, drainPeriod, idleDrain, s.handle); err != nil {
		p.close()
		return nil, err
	}
	return s, nil
}

func newSensor(p *probes, mounts mountTable, opts Options) *Sensor {
	return &Sensor{p: p, opts: opts, mounts: mounts, loaded: time.Now(),
		files: map[probe.FileKey]*fileAcc{}, fsPaths: map[probe.FileKey]string{}, nsSeen: map[probe.FileKey]string{}, nsView: map[probe.FileKey]string{}, born: map[probe.FileKey]bool{}, sightTS: map[probe.FileKey]uint64{}, cutPaths: map[probe.FileKey]bool{},
		handles:    filehandle.New(maxHandles),
		fileKeyBuf: make([]bpfpc.PagecacheFileKey, probe.BatchSize),
		fileBuf:    make([]bpfpc.PagecacheFileStats, probe.BatchSize)}
}

// Chain has the page-cache object's insertion program run the other
// objects' programs for that tracepoint by tail call, after its own work:
// untracked for the threads the run does not track (evictions' count of
// other processes' insertions), tracked for those it does (downloads'
// written files). Either may be nil. Call it before the command starts.
func (s *Sensor) Chain(untracked, tracked *ebpf.Program) error {
	for i, p := range []*ebpf.Program{untracked, tracked} {
		if p == nil {
			continue
		}
		if err := s.p.objs.AddChain.Update(uint32(i), p, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("chain %v into the page cache's insertion program: %w", p, err)
		}
	}
	return nil
}

// Begin notes the run's start (CLOCK_MONOTONIC ns), which the time the
// read exits went on counts from.
func (s *Sensor) Begin(start uint64) { s.startMono.Store(start) }

// fillEnds sets how rec's fills ended, and when the read exits were on.
func (s *Sensor) fillEnds(rec *record.Record) {
	spans, fillEnd := s.p.readExitSpans()
	rec.FillEnd = fillEnd
	rec.FillsEndedAtReturn = 0
	var ended uint64
	if s.p.objs.RseqEnded != nil && s.p.objs.RseqEnded.Get(&ended) == nil {
		rec.FillsEndedAtReturn = ended
	}
	rec.ReadExitsFromNS = nil
	rec.ReadExitSpans = s.recordSpans(spans, rec.WallNS, fmt.Sprintf("no page filled from disk for %v", ReadExitsQuiet))
	if len(rec.ReadExitSpans) > 0 {
		from := rec.ReadExitSpans[0].FromNS
		rec.ReadExitsFromNS = &from
	}
	rec.RseqReturnSpans = s.recordSpans(s.p.rseqReturnSpans(), rec.WallNS, fmt.Sprintf("no fill asked to end at its return for %v", ReadExitsQuiet))
}

// recordSpans gives the intervals in which a lazily attached program was
// on, in ns since the run's start, off saying why one came off before the
// end of a run of wall ns.
func (s *Sensor) recordSpans(spans []exitSpan, wall int64, off string) []record.ReadExitSpan {
	var out []record.ReadExitSpan
	start := s.startMono.Load()
	for _, sp := range spans {
		span := record.ReadExitSpan{FromNS: probe.Rel(sp.from, start), ToNS: wall}
		if sp.to != 0 {
			span.ToNS = probe.Rel(sp.to, start)
			span.Off = off
		}
		if span.FromNS >= wall && wall > 0 {
			// Attached for a fill after the command ended (its
			// children, the drain): none of the run.
			continue
		}
		out = append(out, span)
	}
	return out
}

// namesAt is where a path record's names start: the header before it is
// all handle copies, the names it reads where they lie.
const namesAt = unsafe.Offsetof(bpfpc.PagecachePathEvent{}.Names)

// handle decodes one path record: the header, then len bytes of
// NUL-terminated names, leaf first. The names are taken as bytes, so a
// name that is not UTF-8 keeps every byte.
func (s *Sensor) handle(raw []byte) {
	if uintptr(len(raw)) < namesAt {
		return
	}
	// Only the header is copied: a whole record is 4 KiB of names, most
	// of them unused.
	var ev bpfpc.PagecachePathEvent
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&ev)), namesAt), raw)
	body := raw[namesAt:]
	body = body[:min(int(ev.Len), len(body))]
	names := make([]string, 0, ev.Depth)
	for len(body) > 0 && len(names) < int(ev.Depth) {
		name, rest, _ := bytes.Cut(body, []byte{0})
		names = append(names, string(name))
		body = rest
	}
	truncated := ev.Truncated != 0
	fsPath := fsPathFromNames(names, truncated)
	key := probe.FileKey{Dev: ev.Dev, Ino: ev.Ino, Gen: ev.Gen}
	s.mu.Lock()
	if bpfpc.PagecachePathKind(ev.Kind) == bpfpc.PagecachePathKindPATH_VIEW {
		// The path a process of another mount namespace used, walked
		// through its mounts in the kernel at its first touch: a cut
		// one is left to the namespace's mount table.
		if !truncated {
			s.nsView[key] = fsPath
		}
		s.mu.Unlock()
		return
	}
	s.seen++
	s.fsPaths[key] = fsPath
	if _, ok := s.sightTS[key]; !ok {
		s.sightTS[key] = ev.Ts
	}
	if truncated {
		s.cutPaths[key] = true
	} else {
		delete(s.cutPaths, key)
	}
	if _, viewed := s.nsView[key]; !viewed {
		if nsp, ok := s.ns.resolve(int32(ev.Tgid), ev.MntNs, ev.Ts, ev.Dev, ev.Ino, fsPath); ok && !truncated {
			s.nsSeen[key] = nsp
		}
	}
	p, resolved := s.mounts.resolve(ev.Dev, fsPath)
	if _, known := s.born[key]; !known && resolved && !truncated {
		if changedBefore(ev.CtimeSec, s.loaded) {
			// Born before it changed last: no statx (a path walk a file:
			// a sixth of coldtrace's CPU in a cold import).
			s.born[key] = false
		} else if born, ok := bornSince(p, s.loaded); ok {
			s.born[key] = born
		}
	}
	if resolved && !truncated && (probe.SeenKind(ev.Kind) == probe.SeenCreated || s.born[key]) {
		s.handles.Take(filehandle.Key{Dev: key.Dev, Ino: key.Ino, Gen: key.Gen}, p, p)
	}
	s.mu.Unlock()
	if s.opts.FileSeen != nil && !truncated && resolved {
		s.opts.FileSeen(probe.FileSeen{PID: int32(ev.Tgid), TID: int32(ev.Tid), TS: ev.Ts, CPUNS: ev.CpuNs,
			Path: p, Dev: ev.Dev, Ino: ev.Ino, Gen: ev.Gen, Kind: probe.SeenKind(ev.Kind)})
	}
}

// PollsLazily: the session may skip polls while its timeline sums
// several into one sample; the counters are cumulative (trace.LazyPoller).
func (s *Sensor) PollsLazily() {}

// Poll reads the files' cumulative counters and adds their deltas to
// sample.
func (s *Sensor) Poll(now uint64, sample *record.Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var waiting, fillWaiting map[probe.FileKey]int64
	fileSample := func(k probe.FileKey, fs *bpfpc.PagecacheFileStats) {
		acc := s.files[k]
		if acc == nil {
			acc = &fileAcc{id: len(s.fileOrder), key: k}
			s.files[k] = acc
			s.fileOrder = append(s.fileOrder, acc)
		}
		acc.lastP = int32(fs.LastTgid)
		cur := fileTimes{accessed: fs.Accessed, missed: fs.Missed, evicted: fs.Evicted, created: fs.Created,
			io: int64(fs.IowaitNs) + waiting[k], miss: int64(fs.MissCpuNs),
			reread: fs.Reread, shared: fs.Shared, fillWait: int64(fs.FillWaitNs) + fillWaiting[k],
			directBytes: fs.DirectBytes, directWait: int64(fs.DirectWaitNs)}
		d := record.FileDelta{File: acc.id, PagesAccessed: subU(cur.accessed, acc.prev.accessed),
			PagesMissed: subU(cur.missed, acc.prev.missed), PagesEvicted: subU(cur.evicted, acc.prev.evicted),
			IOWaitNS: sub(cur.io, acc.prev.io), MissCPUNS: sub(cur.miss, acc.prev.miss), FillWaitNS: sub(cur.fillWait, acc.prev.fillWait),
			DirectWaitNS: sub(cur.directWait, acc.prev.directWait), PagesCreated: subU(cur.created, acc.prev.created)}
		acc.prev = fileTimes{max(acc.prev.accessed, cur.accessed), max(acc.prev.missed, cur.missed),
			max(acc.prev.evicted, cur.evicted), max(acc.prev.created, cur.created), max(acc.prev.io, cur.io), max(acc.prev.miss, cur.miss),
			max(acc.prev.reread, cur.reread), max(acc.prev.shared, cur.shared), max(acc.prev.fillWait, cur.fillWait),
			max(acc.prev.directBytes, cur.directBytes), max(acc.prev.directWait, cur.directWait)}
		if d.PagesAccessed|d.PagesMissed|d.PagesEvicted|d.PagesCreated != 0 || d.IOWaitNS > 0 || d.MissCPUNS > 0 || d.FillWaitNS > 0 || d.DirectWaitNS > 0 {
			sample.Files = append(sample.Files, d)
		}
	}
	// The counters first, then the ongoing waits they cannot hold yet
	// (see sched.Sensor.Waiting).
	if err := s.readFiles(); err != nil {
		return err
	}
	if s.opts.Waiting != nil {
		waiting, fillWaiting = s.opts.Waiting()
	}
	for i := range s.polled {
		fileSample(s.polled[i].key, &s.polled[i].stats)
	}
	smallPages, err := probe.SumPerCPU(s.p.objs.SmallHits, 0)
	if err != nil {
		return fmt.Errorf("read small-file hits: %w", err)
	}
	if smallPages > 0 {
		fileSample(smallFiles, &bpfpc.PagecacheFileStats{Accessed: smallPages})
	}
	return s.pollStacks(sample)
}

// readFiles reads the file table into s.polled.
func (s *Sensor) readFiles() error {
	s.polled = s.polled[:0]
	err := probe.ReadMap(s.p.objs.Files, s.fileKeyBuf, s.fileBuf, func(key bpfpc.PagecacheFileKey, fs *bpfpc.PagecacheFileStats) {
		s.polled = append(s.polled, polledFile{probe.FileKey{Dev: key.Dev, Ino: key.Ino, Gen: key.Gen}, *fs})
	})
	if err != nil {
		return fmt.Errorf("read file table: %w", err)
	}
	return nil
}

// Finish drains the path records and writes the files and the page
// cache's lost counters into rec.
func (s *Sensor) Finish(rec *record.Record) error {
	drainErr := s.ring.Drain(3 * time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fill(rec, rec.Host.PageSize)
	if err := s.fileStacks(rec, rec.Host.PageSize); err != nil {
		rec.Warnings = append(rec.Warnings, "pagecache: "+err.Error())
	}
	s.sampleStackNames(rec)
	if err := s.readOrders(rec); err != nil {
		rec.Warnings = append(rec.Warnings, "pagecache: "+err.Error())
	}
	lost, err := probe.Lost(s.p.objs.Lost, bpfpc.PagecacheLostKindLOST_RINGBUF, bpfpc.PagecacheLostKindLOST_FILES,
		bpfpc.PagecacheLostKindLOST_FILL_END, bpfpc.PagecacheLostKindLOST_PAGES)
	if err != nil {
		return fmt.Errorf("pagecache: %w", err)
	}
	rec.Lost.RingBuffer += lost[bpfpc.PagecacheLostKindLOST_RINGBUF]
	rec.Lost.FileTable += lost[bpfpc.PagecacheLostKindLOST_FILES]
	rec.Lost.FillEnds += lost[bpfpc.PagecacheLostKindLOST_FILL_END]
	rec.Lost.Pages += lost[bpfpc.PagecacheLostKindLOST_PAGES]
	s.fillEnds(rec)
	if w := fillEndWarning(rec.FillEnd); w != "" {
		rec.Warnings = append(rec.Warnings, w)
	}
	if n, err := probe.SumPerCPU(s.p.objs.Lost, uint32(bpfpc.PagecacheLostKindLOST_STACKS)); err == nil && n > 0 {
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("python stacks: %d charges found the file-stack table full; that time is in the files' totals without a stack", n))
	}
	rec.Self.EventsSeen += s.seen
	if drainErr != nil {
		return fmt.Errorf("pagecache: %w", drainErr)
	}
	return nil
}

// fillEndWarning is what a record whose fills ended as fillEnd says of
// it, "" when nothing: the final record and every checkpoint alike.
func fillEndWarning(fillEnd string) string {
	if fillEnd != record.FillEndNextLook {
		return ""
	}
	return "fills of reads ended at the next look at the thread (--no-read-exits on a kernel that refuses task works to tracing programs): each read's copy of its last pages is not in its disk read"
}

// Close stops the reader and releases the probes.
func (s *Sensor) Close() error {
	err := s.ring.Close()
	s.handles.Close()
	s.mu.Lock()
	s.ns.close()
	s.mu.Unlock()
	if cerr := s.p.close(); err == nil {
		err = cerr
	}
	return err
}

// reused are the files whose inode number a later file of the run was
// given (same device and number, another generation): each was deleted
// before that file was created, so nothing at its name, nor any name
// found by its number, is it any more.
// Rows are made in the order polls find them, not in the order the
// files appeared: the path records' times tell which came last.
func (s *Sensor) reused() map[probe.FileKey]bool {
	last := map[probe.FileKey]probe.FileKey{} // by (dev, ino): the latest generation seen
	out := map[probe.FileKey]bool{}
	for _, f := range s.fileOrder {
		ts, seen := s.sightTS[f.key]
		if !seen {
			continue // no path record: no name to get wrong
		}
		num := probe.FileKey{Dev: f.key.Dev, Ino: f.key.Ino}
		prev, ok := last[num]
		switch {
		case !ok:
			last[num] = f.key
		case s.sightTS[prev] < ts:
			out[prev] = true
			last[num] = f.key
		default:
			out[f.key] = true
		}
	}
	return out
}

func (s *Sensor) fill(r *record.Record, pageSize int) {
	reused := s.reused()
	namespaces := pidNamespaces{}
	for _, f := range s.fileOrder {
		rf := record.File{ID: f.id, Dev: f.key.Dev, Ino: f.key.Ino, Gen: f.key.Gen,
			PagesAccessed: f.prev.accessed, PagesMissed: f.prev.missed, PagesEvicted: f.prev.evicted, PagesCreated: f.prev.created,
			BytesFromDisk: f.prev.missed * uint64(pageSize), IOWaitNS: f.prev.io, MissCPUNS: f.prev.miss,
			FillWaitNS: f.prev.fillWait, PagesReread: min(f.prev.reread, f.prev.missed), PagesShared: f.prev.shared,
			DirectBytes: f.prev.directBytes, DirectWaitNS: min(f.prev.directWait, f.prev.io)}
		rf.Path = s.pathOf(f)
		rf.FS = s.mounts.fsType(f.key.Dev)
		// A cut walk resolves to no mount; the processes' open files
		// may still give the whole name.
		rf.NameCut = s.cutPaths[f.key] && !strings.HasPrefix(rf.Path, "/")
		if fsPath, ok := s.fsPaths[f.key]; ok {
			p, ok := s.nsView[f.key]
			if !ok {
				if ns := s.ns.foreignNS(f.lastP, namespaces); ns != "" {
					p, ok = s.ns.resolveIn(ns, strconv.Itoa(int(f.lastP)), 0, f.key.Dev, f.key.Ino, fsPath)
				}
			}
			if !ok {
				p, ok = s.nsSeen[f.key]
			}
			if ok && p != rf.Path {
				// The path the process used; the host's beside it.
				rf.Path, rf.HostPath = p, rf.Path
			}
		}
		statPath := rf.Path
		if rf.HostPath != "" {
			statPath = rf.HostPath
		}
		// A reused file was deleted: it keeps the name it was seen
		// under, and no size.
		if !reused[f.key] {
			if size, ok := statMatches(statPath, f.key.Ino); ok {
				rf.SizeBytes = size
			} else {
				s.followRename(f.key, &rf)
			}
		}
		r.Files = append(r.Files, rf)
	}
	s.holesCreated(r, uint64(pageSize), reused)
}

// holesCreated counts the pages that files the run created (born) missed
// without reading them again after an eviction as pages created: holes,
// zero-filled by the filesystem, not read from disk. The samples' deltas
// move with the totals, earliest first.
func (s *Sensor) holesCreated(r *record.Record, pageSize uint64, reused map[probe.FileKey]bool) {
	holes := map[int]uint64{}
	for i := range r.Files {
		f := &r.Files[i]
		if f.PagesMissed <= f.PagesReread {
			continue
		}
		key := probe.FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen}
		born, known := s.born[key]
		if !known && strings.HasPrefix(f.Path, "/") && !reused[key] {
			// Its name had moved before it was read (a compiler's output
			// renamed into place): its final name tells.
			if _, same := statMatches(f.Path, f.Ino); same {
				born, _ = bornSince(f.Path, s.loaded)
			}
		}
		if !born {
			continue
		}
		n := f.PagesMissed - f.PagesReread
		holes[f.ID] = n
		f.PagesMissed -= n
		f.PagesCreated += n
		f.BytesFromDisk = f.PagesMissed * pageSize
	}
	if len(holes) == 0 {
		return
	}
	for i := range r.Samples {
		for j := range r.Samples[i].Files {
			d := &r.Samples[i].Files[j]
			if n := min(holes[d.File], d.PagesMissed); n > 0 {
				d.PagesMissed -= n
				d.PagesCreated += n
				holes[d.File] -= n
			}
		}
	}
}

func (s *Sensor) pathOf(f *fileAcc) string {
	if f.key == smallFiles {
		return SmallFilesPath
	}
	if f.key.Ino&unknownDirect != 0 {
		major, minor := devMajorMinor(f.key.Dev)
		return fmt.Sprintf(DirectUnknownFormat, uint32(f.key.Ino), major, minor)
	}
	if fsPath, ok := s.fsPaths[f.key]; ok {
		if p, ok := s.mounts.resolve(f.key.Dev, fsPath); ok {
			return p
		}
		// A filesystem the command mounted during the run: read the mount
		// table again, once, not once per unresolved file.
		if !s.mountsReread {
			s.mountsReread = true
			if mt, err := readMountTable(s.opts.MountInfo); err == nil {
				s.mounts = mt
			}
			if p, ok := s.mounts.resolve(f.key.Dev, fsPath); ok {
				return p
			}
		}
	}
	if f.lastP > 0 {
		if p := findInProc(f.lastP, f.key.Dev, f.key.Ino); p != "" {
			return p
		}
	}
	major, minor := devMajorMinor(f.key.Dev)
	// The page cache of a block device itself (its inode number is its
	// dev_t) holds filesystem metadata: directories, inodes, the journal.
	if f.key.Ino < 1<<32 {
		if ms := s.mounts[uint32(f.key.Ino)]; len(ms) > 0 {
			bmaj, bmin := devMajorMinor(uint32(f.key.Ino))
			return fmt.Sprintf("[filesystem metadata of %d:%d, mounted on %s]", bmaj, bmin, ms[0].mountPoint)
		}
	}
	if fsPath, ok := s.fsPaths[f.key]; ok {
		return fmt.Sprintf("[dev %d:%d]%s", major, minor, fsPath)
	}
	return fmt.Sprintf("[dev %d:%d ino %d]", major, minor, f.key.Ino)
}

func sub(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return 0
}

func subU(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}
