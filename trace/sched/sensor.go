package sched

import (
	"fmt"
	"github.com/cilium/ebpf/btf"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// Thread flags and event kinds, from bpf/sched's enums.
const (
	tfOnCPU   = uint32(bpfsched.SchedThreadFlagTF_ON_CPU)
	tfOutIO   = uint32(bpfsched.SchedThreadFlagTF_OUT_IOWAIT)
	tfOutRunQ = uint32(bpfsched.SchedThreadFlagTF_OUT_RUNNABLE)
	tfExited  = uint32(bpfsched.SchedThreadFlagTF_EXITED)
	tfDead    = uint32(bpfsched.SchedThreadFlagTF_DEAD)
	tfOutFill = uint32(bpfsched.SchedThreadFlagTF_OUT_FILL)
	tfPython  = uint32(bpfsched.SchedThreadFlagTF_PYTHON)
)

// drainPeriod is how often the reader looks for records written without
// a wake-up (see ring_wakeup in bpf/include/common.h); idleDrain how seldom, once
// no process has forked, exec'd or exited for a while: nothing waits for
// these records before the end of the run.
const (
	drainPeriod = 50 * time.Millisecond
	idleDrain   = 400 * time.Millisecond
)

// threadTimes are one thread's cumulative times, ongoing intervals
// included up to the poll.
type threadTimes struct {
	cpu, io, runq, other, miss int64
	// fillWait is off-CPU time (not I/O) inside page-cache fills,
	// fillRunq its run-queue part.
	fillWait, fillRunq int64
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
	// fillOut and fillRunqOut are the fill waits reported so far (capped
	// per interval as the deltas are).
	fillOut, fillRunqOut int64
	// unseenIns is the kernel's count of the thread's switch-ins the
	// program did not see (its intervals repaired in the kernel).
	unseenIns uint32
	// unseenOuts counts its switch-outs the program did not see.
	unseenOuts uint32
}

// ongoingWait is an off-CPU interval a thread was in at a poll: the
// kernel charges it to its file only when the thread runs again, so the
// poll projects it up to now.
type ongoingWait struct {
	slot     uint32
	lastTs   uint64 // the switch out that began it
	flags    uint32
	file     probe.FileKey
	io, fill int64
}

type procAcc struct {
	pid, ppid  int32
	comm, exe  string
	args       []string
	argsCut    bool
	exeCut     bool
	start, end int64
	exitCode   int
	exited     bool
	waited     bool // end and exit code from wait(2) (Exited)
	// deadNS is the latest final switch out (TF_DEAD) of its threads,
	// and liveGen the poll that last saw one of its threads alive: see
	// processEnd.
	deadNS  int64
	liveGen uint64
}

// processEnd is when p's traced life ended. An exited process whose
// threads were all seen switched out for the last time ended at the last
// of those switches: its exit event comes before the teardown (exit_mm,
// the files), which a dying thread can spend runnable behind busy loops
// (a cc1 exited 250 ms before its last switch: its thread's time then
// exceeded the process's life by that), and wait(2) reaches the session
// after it, as late as coldtrace's own goroutine gets a CPU (which made
// the command's main thread look 0.1-0.9 s short of its life). Threads
// count their time up to that switch, so the process's life ends there.
func (s *Sensor) processEnd(p *procAcc) int64 {
	if !p.exited || p.deadNS == 0 || p.liveGen == s.pollGen {
		return p.end
	}
	if p.waited {
		return min(p.end, p.deadNS)
	}
	return max(p.end, p.deadNS)
}

// Sensor is the loaded scheduler sensor. Its ring buffer is read on its
// own goroutine; the other methods are called from the run session's.
type Sensor struct {
	p       *probes
	ring    *probe.Ring // nil until Start
	kernel  *btf.Cache  // for Start
	tracked *probe.PIDSet

	mu        sync.Mutex
	startMono uint64
	threads   map[uint32]*threadAcc
	procs     map[int32]*procAcc
	pollGen   uint64 // counts polls (procAcc.liveGen)
	// lastPoll is the previous poll's time (CLOCK_MONOTONIC ns): an
	// off-CPU interval that began after it is new to this poll.
	lastPoll uint64
	seen     uint64
	// waits are the ongoing off-CPU intervals at the last poll that wait
	// for a file (I/O wait, or a wait inside its fill).
	waits []ongoingWait
	// untraced are the processes that left the tracked set at a secure
	// exec, in the order the kernel reported them.
	untraced []record.Untraced
	// recycleErrs counts dead threads' slots that could not be freed.
	recycleErrs int
	recycleErr  error

	tidBuf    []uint32
	threadBuf []bpfsched.SchedThread
}

// Options shape the scheduler sensor's load.
type Options struct {
	// BTF is a kernel BTF cache shared with the other sensors' loads
	// (nil: a cache of its own).
	BTF *btf.Cache
	// TraceSecureExec keeps a process traced through a secure exec
	// (setuid, setgid, file capabilities): only for a real root login,
	// who may read whatever such a program reads. Otherwise the process
	// leaves the tracked set at that exec, with everything it forks
	// later, and the record lists it as not traced.
	TraceSecureExec bool
}

// New loads and attaches the scheduler probes (Prepare, then Start).
// Nothing is tracked until Seed.
func New(o Options) (*Sensor, error) {
	s, err := Prepare(o)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Prepare creates the scheduler's maps only: Shared is ready for the
// other objects' loads, which need not wait for this one's programs
// (Start). Close releases a sensor that was never started.
func Prepare(o Options) (*Sensor, error) {
	p, err := load(o)
	if err != nil {
		return nil, err
	}
	return &Sensor{p: p, kernel: o.BTF, tracked: probe.NewPIDSet(), threads: map[uint32]*threadAcc{}, procs: map[int32]*procAcc{},
		tidBuf: make([]uint32, probe.BatchSize), threadBuf: make([]bpfsched.SchedThread, probe.BatchSize)}, nil
}

// Start loads and attaches the scheduler's programs, once.
func (s *Sensor) Start() error {
	if err := s.p.loadPrograms(s.kernel); err != nil {
		return err
	}
	s.kernel = nil // not held past the load
	if err := s.p.attach(); err != nil {
		return err
	}
	ring, err := probe.StartRing(s.p.objs.Events, drainPeriod, idleDrain, s.handle)
	if err != nil {
		return err
	}
	s.ring = ring
	return nil
}

// Shared returns the maps the other BPF objects take as replacements.
func (s *Sensor) Shared() Shared {
	o := &s.p.objs
	return Shared{TaskStates: o.TaskStates, Threads: o.Threads, Files: o.Files, RunPages: o.RunPages, FileStacks: o.FileStacks,
		Tracked: o.TrackedTgids}
}

// Replacements are Shared's maps by their names in the BPF objects:
// what the table of sensors says the scheduler creates for the others.
func (s *Sensor) Replacements() map[string]*ebpf.Map { return s.Shared().Replacements() }

// Tracked is every process that was part of the run so far.
func (s *Sensor) Tracked() *probe.PIDSet { return s.tracked }

// Seed makes pid (the gated command, not yet released) the first tracked
// thread.
func (s *Sensor) Seed(pid int, comm string, nowNS uint64) error {
	if err := s.p.seed(pid, nowNS); err != nil {
		return err
	}
	s.mu.Lock()
	s.proc(int32(pid)).comm = comm
	s.mu.Unlock()
	return nil
}

// Begin sets the time the run starts at.
func (s *Sensor) Begin(startMono uint64) {
	s.mu.Lock()
	s.startMono = startMono
	s.mu.Unlock()
}

func (s *Sensor) handle(raw []byte) {
	// Events without argv come without its buffer (TASK_EVENT_HEAD).
	ev, ok := probe.Decode[bpfsched.SchedTaskEvent](raw, unsafe.Offsetof(bpfsched.SchedTaskEvent{}.Args))
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	p := s.proc(int32(ev.Pid))
	switch bpfsched.SchedTaskEventKind(ev.Kind) {
	case bpfsched.SchedTaskEventKindEV_FORK:
		p.ppid = int32(ev.Ppid)
		p.comm = probe.CString(ev.Comm[:])
		p.start = probe.Rel(ev.Ts, s.startMono)
	case bpfsched.SchedTaskEventKindEV_EXEC:
		p.comm = probe.CString(ev.Comm[:])
		p.exe, p.exeCut = execName(int(ev.Pid), probe.CString(ev.Filename[:]), len(ev.Filename))
		if p.ppid == 0 {
			p.ppid = int32(ev.Ppid)
		}
		p.args, p.argsCut = execArgs(int(ev.Pid), probe.Bytes(ev.Args[:min(int(ev.ArgsLen), len(ev.Args))]), int(ev.ArgsTotal))
	case bpfsched.SchedTaskEventKindEV_UNTRACK:
		// The process runs on, untraced: its exit is not reported, nor
		// is anything it forks. Its traced life ends here (not exited).
		p.comm = probe.CString(ev.Comm[:])
		if p.ppid == 0 {
			p.ppid = int32(ev.Ppid)
		}
		p.end = probe.Rel(ev.Ts, s.startMono)
		s.untraced = append(s.untraced, record.Untraced{Path: probe.CString(ev.Filename[:]), PID: int32(ev.Pid),
			Reason: untracedReason(ev.Reason), AtNS: p.end})
	case bpfsched.SchedTaskEventKindEV_EXIT:
		if p.comm == "" {
			p.comm = probe.CString(ev.Comm[:])
		}
		p.exited = true
		if p.waited {
			// wait(2) told the session already, after the exit's
			// teardown (the address space freed after this event, a
			// quarter of a second for a large one on a slow VM): its
			// end and status stand.
			break
		}
		p.end = probe.Rel(ev.Ts, s.startMono)
		ws := unix.WaitStatus(ev.ExitCode)
		if ws.Signaled() {
			p.exitCode = 128 + int(ws.Signal())
		} else {
			p.exitCode = ws.ExitStatus()
		}
	}
}

// untracedReason names a secure exec's reason from the kernel's.
func untracedReason(r uint32) string {
	switch bpfsched.SchedSecureExecReason(r) {
	case bpfsched.SchedSecureExecReasonSX_SETUID:
		return record.UntracedSetuid
	case bpfsched.SchedSecureExecReasonSX_SETGID:
		return record.UntracedSetgid
	}
	return record.UntracedCapabilities
}

// proc is pid's entry, created (and pid tracked) on first sight. Called
// with s.mu held.
func (s *Sensor) proc(pid int32) *procAcc {
	p := s.procs[pid]
	if p == nil {
		p = &procAcc{pid: pid}
		s.procs[pid] = p
		s.tracked.Add(pid)
	}
	return p
}

// unseenAfterNS is how long a thread may stay switched out runnable or
// in I/O wait before a poll asks its own clock whether it ran meanwhile.
const unseenAfterNS = 20e6

// freshAfterNS is how long a wait that began since the previous poll
// must have lasted for the poll to ask its thread's clock: a shorter one
// misplaces at most that much of one poll's sample (the kernel's repair
// keeps the totals right), while a read costs some 9 µs, once per such
// thread and poll.
const freshAfterNS = 5e6

// ranUnseen is how much of the d ns since v's last switch out it spent on
// a CPU after all, added to cur's CPU: a switch in this kernel did not
// show the program (see on_switch) leaves a running thread flagged as
// waiting, and projecting the wait would count the interval twice once
// the switch out repairs it from the same clock. Threads waiting
// runnable or for I/O this long are asked (one /proc read each): neither
// lasts long, while sleeps do; and any wait that began since the last
// poll (fresh) and has lasted freshAfterNS, once: under load a thread
// switched in unseen after a short sleep ran on for most of a poll
// flagged asleep (seen: 9.9 ms of "other wait" in a 20 ms poll of a
// thread reading a file, its CPU in the next poll).
func ranUnseen(v *bpfsched.SchedThread, d int64, fresh bool, cur *threadTimes) int64 {
	if (d < unseenAfterNS && !(fresh && d >= freshAfterNS)) || v.ExecNs == 0 {
		return 0
	}
	exec := readSchedClock(int(v.Tgid), int(v.Tid)).exec
	if exec <= v.ExecNs {
		return 0
	}
	run := min(int64(exec-v.ExecNs), d)
	cur.cpu += run
	return run
}

// ranSinceIn splits the d ns since v's last switch in, v being flagged
// on a CPU, into its run and its run-queue wait: all of it a run, unless
// its switch out was not seen (see on_switch), which leaves a thread
// flagged on a CPU until it runs again; projecting d as CPU then counted
// a long sleep as CPU, and the repair at its switch in counted it again
// as a wait. A thread flagged on a CPU this long is asked its own clocks
// (one /proc read each: few threads run that long between switches): the
// rest of the interval past its run and the run-queue waits that ended
// in it was a sleep (a run-queue wait still going on is among it: the
// kernel adds one to its clock only when it ends).
func ranSinceIn(v *bpfsched.SchedThread, d int64) (run, queued int64) {
	if d < unseenAfterNS || v.ExecNs == 0 {
		return d, 0
	}
	c := readSchedClock(int(v.Tgid), int(v.Tid))
	if c.exec == 0 {
		return d, 0 // gone: its clock is not known
	}
	if c.exec > v.ExecNs {
		run = min(int64(c.exec-v.ExecNs), d)
	}
	if c.runDelay > v.RdelayNs {
		queued = min(int64(c.runDelay-v.RdelayNs), d-run)
	}
	return run, queued
}

// Poll reads the threads' cumulative counters, adds their deltas to
// sample, and frees the slots of threads that have exited for good.
func (s *Sensor) Poll(now uint64, sample *record.Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var waits []ongoingWait
	var dead []uint32 // slots
	nslots, err := s.p.slotsInUse()
	if err != nil {
		return fmt.Errorf("read thread slots: %w", err)
	}
	s.pollGen++
	err = probe.ReadArray(s.p.objs.Threads, nslots, s.tidBuf, s.threadBuf, func(slot uint32, v *bpfsched.SchedThread) {
		if v.Tid == 0 {
			return // free
		}
		if p := s.procs[int32(v.Tgid)]; p != nil {
			if v.Flags&tfDead != 0 {
				p.deadNS = max(p.deadNS, probe.Rel(v.LastTs, s.startMono))
			} else {
				p.liveGen = s.pollGen
			}
		}
		cur := threadTimes{cpu: int64(v.CpuNs), io: int64(v.IowaitNs), runq: int64(v.RunqNs),
			other: int64(v.OtherNs), miss: int64(v.MissCpuNs), fillWait: int64(v.FillWaitNs), fillRunq: int64(v.FillRunqNs)}
		// An exiting thread runs on (exit code, task works) until its
		// last switch, which can come after the command's exit is
		// reported and after the final poll when others hold the CPUs:
		// its ongoing time counts until that switch.
		// A process wait(2) reported is gone, threads and all: its last
		// switch out was missed (this kernel now and then runs a
		// thread without its sched_switch reaching the program), and
		// its time ends at that report, not at this poll.
		end := now
		if p := s.procs[int32(v.Tgid)]; p != nil && p.waited {
			end = min(end, s.startMono+uint64(max(p.end, 0)))
		}
		if w, ok := projectOngoing(v, slot, end, now, v.LastTs > s.lastPoll, &cur); ok {
			waits = append(waits, w)
		}
		acc := s.threads[v.Tid]
		if acc == nil {
			acc = &threadAcc{tid: int32(v.Tid), pid: int32(v.Tgid)}
			// A thread that died before its first poll has no /proc
			// entry left to name it (a fork/exec storm tried 2,000 opens
			// a second in vain): the process table names it.
			if v.Flags&tfDead == 0 {
				acc.comm = threadComm(int32(v.Tgid), int32(v.Tid))
			}
			s.threads[v.Tid] = acc
		}
		d := threadTimes{sub(cur.cpu, acc.prev.cpu), sub(cur.io, acc.prev.io), sub(cur.runq, acc.prev.runq),
			sub(cur.other, acc.prev.other), 0, sub(cur.fillWait, acc.prev.fillWait), sub(cur.fillRunq, acc.prev.fillRunq)}
		// Fill waits are part of the run queue and other waits: never more.
		d.fillRunq = min(d.fillRunq, d.runq)
		d.fillWait = min(d.fillWait, d.runq+d.other)
		// A poll may copy a slot while on_switch writes it (no lock).
		// Flags sit before the counters and are written last, so a copy
		// that sees TF_DEAD has the final counters; a torn copy of a live
		// slot can only project an interval twice, and maxT keeps each
		// counter's largest value: torn reads over-count until the next
		// poll, they never lose time. (Switch-ins the kernel never shows
		// the program are repaired there: README Limitations.)
		acc.prev = maxT(acc.prev, cur)
		acc.unseenIns = max(acc.unseenIns, v.UnseenIns)
		acc.unseenOuts = max(acc.unseenOuts, v.UnseenOuts)
		d.miss = sub(min(acc.prev.miss, acc.prev.cpu), acc.missOut)
		acc.missOut += d.miss
		acc.fillOut += d.fillWait
		acc.fillRunqOut += min(d.fillRunq, d.fillWait)
		if d.cpu > 0 || d.io > 0 || d.miss > 0 || d.runq > 0 {
			sample.Threads = append(sample.Threads, record.ThreadDelta{TID: acc.tid, PID: acc.pid, CPUNS: d.cpu,
				IOWaitNS: d.io, MissCPUNS: d.miss, RunQueueNS: d.runq, OtherWaitNS: d.other,
				FillWaitNS: d.fillWait, FillRunQueueNS: min(d.fillRunq, d.fillWait)})
		}
		if v.Flags&tfDead != 0 {
			dead = append(dead, slot)
		}
	})
	if err != nil {
		return fmt.Errorf("read thread table: %w", err)
	}
	s.waits = waits
	s.lastPoll = now
	s.recycle(dead)
	return nil
}

// projectOngoing adds to cur the interval from the thread's last switch
// up to end, by what the thread was doing (on a CPU, in an I/O wait, on
// the run queue, inside a fill); the wait it returns, with ok, is one a
// file is charged for once the kernel charges it. fresh says the
// interval began since the previous poll: its thread is asked its own
// clock whatever the wait (ranUnseen).
func projectOngoing(v *bpfsched.SchedThread, slot uint32, end, now uint64, fresh bool, cur *threadTimes) (ongoingWait, bool) {
	if v.LastTs == 0 || end <= v.LastTs || v.Flags&tfDead != 0 {
		return ongoingWait{}, false
	}
	d := int64(end - v.LastTs)
	w := ongoingWait{slot: slot, lastTs: v.LastTs, flags: v.Flags,
		file: probe.FileKey{Dev: v.WaitFile.Dev, Ino: v.WaitFile.Ino, Gen: v.WaitFile.Gen}}
	switch {
	case v.Flags&tfOnCPU != 0:
		run, queued := ranSinceIn(v, d)
		cur.cpu += run
		cur.runq += queued
		cur.other += d - run - queued
		// The open fill interval's CPU so far, not yet charged.
		if v.FillMark != 0 && now > v.FillMark {
			cur.miss += int64(now - max(v.FillMark, v.LastTs))
		}
	case v.Flags&tfOutIO != 0:
		d -= ranUnseen(v, d, fresh, cur)
		cur.io += d
		w.io = d
	case v.Flags&tfOutRunQ != 0:
		d -= ranUnseen(v, d, fresh, cur)
		cur.runq += d
	default:
		// A sleep: asked only when new, or a sleeping thread would be
		// read at every poll of a long sleep.
		if fresh {
			d -= ranUnseen(v, d, fresh, cur)
		}
		cur.other += d
	}
	if v.Flags&tfOutFill != 0 && v.Flags&tfOnCPU == 0 {
		cur.fillWait += d
		w.fill = d
		if v.Flags&tfOutRunQ != 0 {
			cur.fillRunq += d
		}
	}
	return w, w.file.Ino != 0 && (w.io > 0 || w.fill > 0)
}

// recycle frees dead threads' slots: their counters are final.
func (s *Sensor) recycle(dead []uint32) {
	// A dead thread's counters are final: free its slot for the next fork
	// (the kernel writes a slot only while its task lives). A slot that
	// cannot be pushed stays cleared and unused: the table has 65,536.
	var free bpfsched.SchedThread
	for _, slot := range dead {
		err := s.p.objs.Threads.Update(slot, &free, ebpf.UpdateAny)
		if err == nil {
			err = s.p.objs.FreeSlots.Update(nil, slot, ebpf.UpdateAny)
		}
		if err != nil {
			s.recycleErrs++
			if s.recycleErr == nil {
				s.recycleErr = fmt.Errorf("recycle thread slot %d: %w", slot, err)
			}
		}
	}
}

// Waiting is, by file, the I/O waits and the waits inside page-cache
// fills of the ongoing off-CPU intervals the last poll projected, less
// those the kernel has charged since: call it after reading the file
// counters. The kernel adds a wait to the thread and to its file when
// the thread runs again; a wait that ended between the thread poll and
// the file read is in the file's counter already, and projecting it
// again would count it twice (and the poller's running maximum would
// keep the excess for good). A thread whose slot still shows the same
// switch out had not run again when the files were read.
func (s *Sensor) Waiting() (io, fill map[probe.FileKey]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	io, fill = map[probe.FileKey]int64{}, map[probe.FileKey]int64{}
	var v bpfsched.SchedThread
	for _, w := range s.waits {
		if err := s.p.objs.Threads.Lookup(w.slot, &v); err != nil || v.LastTs != w.lastTs || v.Flags != w.flags {
			continue
		}
		if w.io > 0 {
			io[w.file] += w.io
		}
		if w.fill > 0 {
			fill[w.file] += w.fill
		}
	}
	return io, fill
}

// LivePIDs are the tracked processes that still have a thread that has
// not exited, in the kernel's tracked set: the ones to kill when the user
// insists, including those that left the command's process group.
func (s *Sensor) LivePIDs() ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nslots, err := s.p.slotsInUse()
	if err != nil {
		return nil, fmt.Errorf("read thread slots: %w", err)
	}
	seen := map[int]bool{}
	var pids []int
	err = probe.ReadArray(s.p.objs.Threads, nslots, s.tidBuf, s.threadBuf, func(_ uint32, v *bpfsched.SchedThread) {
		if v.Tid != 0 && v.Flags&tfExited == 0 && !seen[int(v.Tgid)] {
			seen[int(v.Tgid)] = true
			pids = append(pids, int(v.Tgid))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read thread table: %w", err)
	}
	return pids, nil
}

// Exited records how the command's first process ended, as wait(2) told
// the session (its exit event may carry less).
func (s *Sensor) Exited(pid int, endNS int64, exitCode int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.procs[int32(pid)]; p != nil {
		p.exited, p.waited, p.end, p.exitCode = true, true, endNS, exitCode
	}
}

// Finish drains the ring buffer and writes threads, processes and the
// scheduler's lost counters into rec.
func (s *Sensor) Finish(rec *record.Record) error {
	drainErr := s.ring.Drain(3 * time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fill(rec)
	rec.Untraced = append(rec.Untraced, s.untraced...)
	if s.recycleErrs > 0 {
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("sched: %d thread slots could not be recycled (first: %v)", s.recycleErrs, s.recycleErr))
	}
	lost, err := probe.Lost(s.p.objs.Lost, bpfsched.SchedLostKindLOST_RINGBUF, bpfsched.SchedLostKindLOST_THREADS)
	if err != nil {
		return fmt.Errorf("sched: %w", err)
	}
	rec.Lost.RingBuffer += lost[bpfsched.SchedLostKindLOST_RINGBUF]
	rec.Lost.ThreadTable += lost[bpfsched.SchedLostKindLOST_THREADS]
	if n, err := probe.SumPerCPU(s.p.objs.Lost, uint32(bpfsched.SchedLostKindLOST_STACKS)); err == nil && n > 0 {
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("python stacks: %d waits found the file-stack table full; that time is in the files' totals without a stack", n))
	}
	rec.Self.EventsSeen += s.seen
	if drainErr != nil {
		return fmt.Errorf("sched: %w", drainErr)
	}
	return nil
}

// Close stops the reader and releases the probes.
func (s *Sensor) Close() error {
	var err error
	if s.ring != nil {
		err = s.ring.Close()
	}
	if cerr := s.p.close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Sensor) fill(r *record.Record) {
	for _, th := range s.threads {
		r.Self.SwitchInsUnseen += uint64(th.unseenIns)
		r.Self.SwitchOutsUnseen += uint64(th.unseenOuts)
		if th.comm == "" {
			if p := s.procs[th.pid]; p != nil {
				th.comm = p.comm
			}
		}
		r.Threads = append(r.Threads, record.Thread{TID: th.tid, PID: th.pid, Comm: th.comm,
			CPUNS: th.prev.cpu, OffCPUNS: th.prev.io + th.prev.runq + th.prev.other, IOWaitNS: th.prev.io,
			RunQueueNS: th.prev.runq, MissCPUNS: min(th.prev.miss, th.prev.cpu),
			FillWaitNS: th.fillOut, FillRunQueueNS: th.fillRunqOut})
	}
	sort.Slice(r.Threads, func(i, j int) bool { return r.Threads[i].TID < r.Threads[j].TID })

	byPID := map[int32]*record.Process{}
	for pid, p := range s.procs {
		byPID[pid] = &record.Process{PID: pid, PPID: p.ppid, Comm: p.comm, Exe: p.exe, ExeCut: p.exeCut, Args: p.args, ArgsCut: p.argsCut,
			StartNS: p.start, EndNS: s.processEnd(p), ExitCode: p.exitCode, Exited: p.exited}
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
		p.FillWaitNS += th.FillWaitNS
		p.FillRunQueueNS += th.FillRunQueueNS
	}
	for _, p := range byPID {
		r.Processes = append(r.Processes, *p)
	}
	sort.Slice(r.Processes, func(i, j int) bool {
		return r.Processes[i].StartNS < r.Processes[j].StartNS ||
			r.Processes[i].StartNS == r.Processes[j].StartNS && r.Processes[i].PID < r.Processes[j].PID
	})
}

func threadComm(pid, tid int32) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return "" // gone already: the process table names it
	}
	return strings.TrimSpace(string(b))
}

func sub(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return 0
}

func maxT(a, b threadTimes) threadTimes {
	return threadTimes{max(a.cpu, b.cpu), max(a.io, b.io), max(a.runq, b.runq), max(a.other, b.other), max(a.miss, b.miss),
		max(a.fillWait, b.fillWait), max(a.fillRunq, b.fillRunq)}
}

// execArgs is argv from the exec event's copy of it, the first bytes of
// total; when the copy is short, the whole argv from /proc/PID/cmdline
// while the process still runs the image it was taken from (the same
// length), else the copy and cut.
func execArgs(pid int, b []byte, total int) (args []string, cut bool) {
	if len(b) < total {
		if whole, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && len(whole) == total {
			b = whole
		} else {
			cut = true
		}
	}
	if len(b) == 0 {
		return nil, cut
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), cut
}

// execName is the executable's name from an exec event's copy, which
// holds at most size-1 bytes: a copy that fills it may be cut, and the
// kernel's name of the executable (/proc/PID/exe, the resolved path) is
// taken while the process lives; cut reports a name left cut.
func execName(pid int, copied string, size int) (name string, cut bool) {
	if len(copied) < size-1 {
		return copied, false
	}
	whole, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil || len(whole) < len(copied) {
		return copied, true
	}
	return whole, false
}
