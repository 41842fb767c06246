package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/bpf"
	"github.com/coldtrace/coldtrace/record"
)

func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

type fileKey struct {
	dev uint32
	ino uint64
}

// smallFiles says whether k stands for the small files that were only
// read from the page cache: the kernel side counts their pages without an
// entry each (see SMALL_FILE_BYTES in bpf/coldtrace.bpf.c). No file has
// inode 0, so the zero key is theirs.
func (k fileKey) smallFiles() bool { return k == fileKey{} }

// SmallFilesPath names the small files' row in records.
const SmallFilesPath = "[small files (<256 KiB), cache hits only]"

// threadTimes are one thread's cumulative times, ongoing intervals
// included up to the poll.
type threadTimes struct {
	cpu, io, runq, other, miss int64
}

type threadAcc struct {
	tid, pid int32
	comm     string
	prev     threadTimes
	// missOut is the miss time reported so far. Miss time is charged at
	// syscall exit, on-CPU time at switches and polls, so one interval can
	// see a miss whose CPU time an earlier poll already reported; capping
	// the cumulative miss at the cumulative CPU carries it forward
	// instead of losing it.
	missOut int64
}

type fileTimes struct {
	accessed, missed, evicted, created uint64
	io, miss                           int64
}

type fileAcc struct {
	id    int
	key   fileKey
	lastP int32 // last process that touched it, for /proc lookups
	prev  fileTimes
}

type procAcc struct {
	pid, ppid  int32
	comm, exe  string
	args       []string
	start, end int64
	exitCode   int
	exited     bool
}

// collector owns everything gathered during a run. One goroutine drives
// it: ring-buffer records arrive over a channel, polls come from a ticker.
type collector struct {
	p         *probes
	startMono uint64
	mounts    mountTable
	// mountsReread is set once the mount table was read again at the end.
	mountsReread bool
	threads      map[uint32]*threadAcc
	files        map[fileKey]*fileAcc
	fileOrder    []*fileAcc
	procs        map[int32]*procAcc
	fsPaths      map[fileKey]string
	samples      []record.Sample
	tracked      *pidSet
	lost         record.Lost
	seen         uint64
	// Reused buffers for batch map reads.
	tidBuf     []uint32
	threadBuf  []bpf.ColdtraceThread
	fileKeyBuf []bpf.ColdtraceFileKey
	fileBuf    []bpf.ColdtraceFileStats
	warnings   []string
	// fileSeen, when set, is told the path of each file the first time a
	// traced process reads or maps it.
	fileSeen func(pid int32, path string)
}

func newCollector(p *probes, mounts mountTable) *collector {
	return &collector{
		p:       p,
		mounts:  mounts,
		threads: map[uint32]*threadAcc{},
		files:   map[fileKey]*fileAcc{},
		procs:   map[int32]*procAcc{},
		fsPaths: map[fileKey]string{},

		tidBuf:     make([]uint32, batchSize),
		threadBuf:  make([]bpf.ColdtraceThread, batchSize),
		fileKeyBuf: make([]bpf.ColdtraceFileKey, batchSize),
		fileBuf:    make([]bpf.ColdtraceFileStats, batchSize),
	}
}

// batchSize is how many map entries one lookup syscall returns; larger
// than a hash bucket can ever hold, so the kernel never answers ENOSPC.
const batchSize = 4096

// readMap calls fn for every entry of m. It reads in batches, one syscall
// per batchSize entries: polling 20,000 files entry by entry costs more
// CPU than the workload being traced. Kernels without batch lookups fall
// back to iteration.
func readMap[K, V any](m *ebpf.Map, keys []K, vals []V, fn func(K, *V)) error {
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			fn(keys[i], &vals[i])
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			var k K
			var v V
			it := m.Iterate()
			for it.Next(&k, &v) {
				fn(k, &v)
			}
			return it.Err()
		case err != nil:
			return err
		}
	}
}

// readArray calls fn for entries [0, n) of the array m, in batches.
func readArray[V any](m *ebpf.Map, n int, keys []uint32, vals []V, fn func(uint32, *V)) error {
	var cursor ebpf.MapBatchCursor
	for done := 0; done < n; {
		k := min(len(keys), n-done)
		got, err := m.BatchLookup(&cursor, keys[:k], vals[:k], nil)
		for i := 0; i < got; i++ {
			fn(keys[i], &vals[i])
		}
		done += got
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			for i := uint32(done); i < uint32(n); i++ {
				if err := m.Lookup(i, &vals[0]); err != nil {
					return err
				}
				fn(i, &vals[0])
			}
			return nil
		case err != nil:
			return err
		case got == 0:
			return nil
		}
	}
	return nil
}

func (c *collector) rel(ts uint64) int64 {
	if ts <= c.startMono {
		return 0
	}
	return int64(ts - c.startMono)
}

// readEvents forwards ring-buffer records until the reader is closed or
// flushed. Path records are written without waking the reader, so it
// also wakes itself every drain period.
func readEvents(rd *ringbuf.Reader, drain time.Duration, out chan<- []byte) {
	defer close(out)
	var rec ringbuf.Record
	for {
		rd.SetDeadline(time.Now().Add(drain))
		if err := rd.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, ringbuf.ErrFlushed) {
				return
			}
			continue
		}
		out <- bytes.Clone(rec.RawSample)
	}
}

func cString(b []int8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	s := make([]byte, n)
	for i := 0; i < n; i++ {
		s[i] = byte(b[i])
	}
	return string(s)
}

func (c *collector) handleEvent(raw []byte) {
	if len(raw) < 4 {
		return
	}
	c.seen++
	switch binary.LittleEndian.Uint32(raw) {
	case evPath:
		// Header: type, tgid, dev, depth (u32), ino (u64), truncated, len
		// (u32), then len bytes of NUL-terminated names, leaf first.
		const hdr = 32
		if len(raw) < hdr {
			return
		}
		le := binary.LittleEndian
		dev, depth, ino := le.Uint32(raw[8:]), le.Uint32(raw[12:]), le.Uint64(raw[16:])
		truncated, n := le.Uint32(raw[24:]) != 0, int(le.Uint32(raw[28:]))
		body := raw[hdr:min(len(raw), hdr+n)]
		names := make([]string, 0, depth)
		for len(body) > 0 && len(names) < int(depth) {
			name, rest, _ := bytes.Cut(body, []byte{0})
			names = append(names, string(name))
			body = rest
		}
		fsPath := fsPathFromNames(names, truncated)
		c.fsPaths[fileKey{dev, ino}] = fsPath
		if c.fileSeen != nil && !truncated {
			if p, ok := c.mounts.resolve(dev, fsPath); ok {
				c.fileSeen(int32(le.Uint32(raw[4:])), p)
			}
		}
	case evFork, evExec, evExit:
		// The record is the struct's bytes (a heap copy, so aligned);
		// reading it in place is much cheaper than binary.Read.
		if len(raw) < int(unsafe.Sizeof(bpf.ColdtraceTaskEvent{})) {
			return
		}
		c.handleTask((*bpf.ColdtraceTaskEvent)(unsafe.Pointer(&raw[0])))
	}
}

func (c *collector) proc(pid int32) *procAcc {
	p := c.procs[pid]
	if p == nil {
		p = &procAcc{pid: pid}
		c.procs[pid] = p
		if c.tracked != nil {
			c.tracked.add(pid)
		}
	}
	return p
}

func (c *collector) handleTask(ev *bpf.ColdtraceTaskEvent) {
	pid := int32(ev.Pid)
	p := c.proc(pid)
	switch ev.Type {
	case evFork:
		p.ppid = int32(ev.Ppid)
		p.comm = cString(ev.Comm[:])
		p.start = c.rel(ev.Ts)
	case evExec:
		p.comm = cString(ev.Comm[:])
		p.exe = cString(ev.Filename[:])
		if p.ppid == 0 {
			p.ppid = int32(ev.Ppid)
		}
		if n := min(int(ev.ArgsLen), len(ev.Args)); n > 0 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(ev.Args[i])
			}
			p.args = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		}
	case evExit:
		if p.comm == "" {
			p.comm = cString(ev.Comm[:])
		}
		p.exited = true
		p.end = c.rel(ev.Ts)
		ws := unix.WaitStatus(ev.ExitCode)
		if ws.Signaled() {
			p.exitCode = 128 + int(ws.Signal())
		} else {
			p.exitCode = ws.ExitStatus()
		}
	}
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

func maxT(a, b threadTimes) threadTimes {
	return threadTimes{max(a.cpu, b.cpu), max(a.io, b.io), max(a.runq, b.runq), max(a.other, b.other), max(a.miss, b.miss)}
}

// poll reads the kernel's cumulative counters, turns them into one sample
// of deltas, and forgets threads that have exited for good.
func (c *collector) poll(now uint64) error {
	sample := record.Sample{EndNS: c.rel(now)}
	ongoingIO := map[fileKey]int64{}
	var dead []uint32 // slots

	nslots, err := c.p.slotsInUse()
	if err != nil {
		return fmt.Errorf("read thread slots: %w", err)
	}
	err = readArray(c.p.objs.Threads, nslots, c.tidBuf, c.threadBuf, func(slot uint32, v *bpf.ColdtraceThread) {
		if v.Tid == 0 {
			return // free
		}
		tid := v.Tid
		cur := threadTimes{cpu: int64(v.CpuNs), io: int64(v.IowaitNs), runq: int64(v.RunqNs),
			other: int64(v.OtherNs), miss: int64(v.MissCpuNs)}
		if v.LastTs != 0 && now > v.LastTs && v.Flags&tfExited == 0 {
			d := int64(now - v.LastTs)
			switch {
			case v.Flags&tfOnCPU != 0:
				cur.cpu += d
			case v.Flags&tfOutIO != 0:
				cur.io += d
				if v.WaitFile.Ino != 0 {
					ongoingIO[fileKey{v.WaitFile.Dev, v.WaitFile.Ino}] += d
				}
			case v.Flags&tfOutRunQ != 0:
				cur.runq += d
			default:
				cur.other += d
			}
		}
		acc := c.threads[tid]
		if acc == nil {
			acc = &threadAcc{tid: int32(tid), pid: int32(v.Tgid), comm: threadComm(int32(v.Tgid), int32(tid))}
			c.threads[tid] = acc
		}
		d := threadTimes{sub(cur.cpu, acc.prev.cpu), sub(cur.io, acc.prev.io), sub(cur.runq, acc.prev.runq),
			sub(cur.other, acc.prev.other), 0}
		acc.prev = maxT(acc.prev, cur)
		d.miss = sub(min(acc.prev.miss, acc.prev.cpu), acc.missOut)
		acc.missOut += d.miss
		if d.cpu > 0 || d.io > 0 || d.miss > 0 || d.runq > 0 {
			sample.Threads = append(sample.Threads, record.ThreadDelta{TID: acc.tid, PID: acc.pid, CPUNS: d.cpu,
				IOWaitNS: d.io, MissCPUNS: d.miss, RunQueueNS: d.runq, OtherWaitNS: d.other})
		}
		if v.Flags&tfDead != 0 {
			dead = append(dead, slot)
		}
	})
	if err != nil {
		return fmt.Errorf("read thread table: %w", err)
	}
	// A dead thread's counters are final: free its slot for the next fork
	// (the kernel writes a slot only while its task lives).
	var free bpf.ColdtraceThread
	for _, slot := range dead {
		if c.p.objs.Threads.Update(slot, &free, ebpf.UpdateAny) == nil {
			_ = c.p.objs.FreeSlots.Update(nil, slot, ebpf.UpdateAny)
		}
	}

	fileSample := func(k fileKey, fs *bpf.ColdtraceFileStats) {
		acc := c.files[k]
		if acc == nil {
			acc = &fileAcc{id: len(c.fileOrder), key: k}
			c.files[k] = acc
			c.fileOrder = append(c.fileOrder, acc)
		}
		acc.lastP = int32(fs.LastTgid)
		cur := fileTimes{accessed: fs.Accessed, missed: fs.Missed, evicted: fs.Evicted, created: fs.Created,
			io: int64(fs.IowaitNs) + ongoingIO[k], miss: int64(fs.MissCpuNs)}
		d := record.FileDelta{File: acc.id, PagesAccessed: subU(cur.accessed, acc.prev.accessed),
			PagesMissed: subU(cur.missed, acc.prev.missed), PagesEvicted: subU(cur.evicted, acc.prev.evicted),
			IOWaitNS: sub(cur.io, acc.prev.io), MissCPUNS: sub(cur.miss, acc.prev.miss)}
		acc.prev = fileTimes{max(acc.prev.accessed, cur.accessed), max(acc.prev.missed, cur.missed),
			max(acc.prev.evicted, cur.evicted), max(acc.prev.created, cur.created), max(acc.prev.io, cur.io), max(acc.prev.miss, cur.miss)}
		if d.PagesAccessed|d.PagesMissed|d.PagesEvicted != 0 || d.IOWaitNS > 0 || d.MissCPUNS > 0 {
			sample.Files = append(sample.Files, d)
		}
	}
	err = readMap(c.p.objs.Files, c.fileKeyBuf, c.fileBuf, func(key bpf.ColdtraceFileKey, fs *bpf.ColdtraceFileStats) {
		fileSample(fileKey{key.Dev, key.Ino}, fs)
	})
	if err != nil {
		return fmt.Errorf("read file table: %w", err)
	}
	var small []uint64
	if err := c.p.objs.SmallHits.Lookup(uint32(0), &small); err != nil {
		return fmt.Errorf("read small-file hits: %w", err)
	}
	var smallPages uint64
	for _, n := range small {
		smallPages += n
	}
	if smallPages > 0 {
		fileSample(fileKey{}, &bpf.ColdtraceFileStats{Accessed: smallPages})
	}
	if err := c.readLost(); err != nil {
		return err
	}
	c.samples = append(c.samples, sample)
	return nil
}

func (c *collector) readLost() error {
	var per []uint64
	get := func(i uint32) uint64 {
		if err := c.p.objs.Lost.Lookup(i, &per); err != nil {
			return 0
		}
		var s uint64
		for _, v := range per {
			s += v
		}
		return s
	}
	c.lost = record.Lost{RingBuffer: get(lostRing), FileTable: get(lostFiles), ThreadTable: get(lostThread), Paths: get(lostPaths), FillEnds: get(lostFillEnd)}
	return nil
}

func threadComm(pid, tid int32) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// fill writes everything gathered into r.
func (c *collector) fill(r *record.Record, pageSize int) {
	for _, th := range c.threads {
		if th.comm == "" {
			if p := c.procs[th.pid]; p != nil {
				th.comm = p.comm
			}
		}
		r.Threads = append(r.Threads, record.Thread{TID: th.tid, PID: th.pid, Comm: th.comm,
			CPUNS: th.prev.cpu, OffCPUNS: th.prev.io + th.prev.runq + th.prev.other, IOWaitNS: th.prev.io,
			RunQueueNS: th.prev.runq, MissCPUNS: min(th.prev.miss, th.prev.cpu)})
	}
	sort.Slice(r.Threads, func(i, j int) bool { return r.Threads[i].TID < r.Threads[j].TID })

	byPID := map[int32]*record.Process{}
	for pid, p := range c.procs {
		byPID[pid] = &record.Process{PID: pid, PPID: p.ppid, Comm: p.comm, Exe: p.exe, Args: p.args,
			StartNS: p.start, EndNS: p.end, ExitCode: p.exitCode, Exited: p.exited}
	}
	for _, th := range r.Threads {
		p := byPID[th.PID]
		if p == nil {
			p = &record.Process{PID: th.PID, Comm: th.Comm}
			byPID[th.PID] = p
		}
		if p.Comm == "" {
			p.Comm = th.Comm
		}
		p.Threads++
		p.CPUNS += th.CPUNS
		p.OffCPUNS += th.OffCPUNS
		p.IOWaitNS += th.IOWaitNS
		p.RunQueueNS += th.RunQueueNS
		p.MissCPUNS += th.MissCPUNS
	}
	for _, p := range byPID {
		r.Processes = append(r.Processes, *p)
	}
	sort.Slice(r.Processes, func(i, j int) bool {
		return r.Processes[i].StartNS < r.Processes[j].StartNS ||
			r.Processes[i].StartNS == r.Processes[j].StartNS && r.Processes[i].PID < r.Processes[j].PID
	})

	for _, f := range c.fileOrder {
		rf := record.File{ID: f.id, Dev: f.key.dev, Ino: f.key.ino,
			PagesAccessed: f.prev.accessed, PagesMissed: f.prev.missed, PagesEvicted: f.prev.evicted, PagesCreated: f.prev.created,
			BytesFromDisk: f.prev.missed * uint64(pageSize), IOWaitNS: f.prev.io, MissCPUNS: f.prev.miss}
		rf.Path = c.pathOf(f)
		if size, ok := statMatches(rf.Path, f.key.dev, f.key.ino); ok {
			rf.SizeBytes = size
		}
		r.Files = append(r.Files, rf)
	}
	r.Samples = c.samples
	r.Lost = c.lost
	r.Self.EventsSeen = c.seen
	r.Warnings = append(r.Warnings, c.warnings...)
}

func (c *collector) pathOf(f *fileAcc) string {
	if f.key.smallFiles() {
		return SmallFilesPath
	}
	if fsPath, ok := c.fsPaths[f.key]; ok {
		if p, ok := c.mounts.resolve(f.key.dev, fsPath); ok {
			return p
		}
		// A filesystem the command mounted during the run: read the mount
		// table again, once, not once per unresolved file.
		if !c.mountsReread {
			c.mountsReread = true
			if mt, err := readMountTable("/proc/self/mountinfo"); err == nil {
				c.mounts = mt
			}
			if p, ok := c.mounts.resolve(f.key.dev, fsPath); ok {
				return p
			}
		}
	}
	if f.lastP > 0 {
		if p := findInProc(f.lastP, f.key.dev, f.key.ino); p != "" {
			return p
		}
	}
	major, minor := devMajorMinor(f.key.dev)
	// The page cache of a block device itself (its inode number is its
	// dev_t) holds filesystem metadata: directories, inodes, the journal.
	if f.key.ino < 1<<32 {
		if ms := c.mounts[uint32(f.key.ino)]; len(ms) > 0 {
			bmaj, bmin := devMajorMinor(uint32(f.key.ino))
			return fmt.Sprintf("[filesystem metadata of %d:%d, mounted on %s]", bmaj, bmin, ms[0].mountPoint)
		}
	}
	if fsPath, ok := c.fsPaths[f.key]; ok {
		return fmt.Sprintf("[dev %d:%d]%s", major, minor, fsPath)
	}
	return fmt.Sprintf("[dev %d:%d ino %d]", major, minor, f.key.ino)
}
