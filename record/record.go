// Package record defines the run record: everything coldtrace gathered about
// one traced command, as a plain Go value that serialises to a versioned,
// documented file. trace writes it; attribution and report read it. Nothing
// here touches the live system.
package record

import (
	"cmp"
	"slices"
	"time"
)

// Schema names the on-disk format. A reader refuses other major versions
// rather than guessing at their meaning. v2 keeps file names byte-exact
// (File's path_b64, host_path_b64) and flags cut names (name_cut); v1
// records read as v2 ones whose names are all UTF-8 and never cut.
const Schema = "coldtrace.record/v2"

// schemaV1 is the earlier format this build still reads.
const schemaV1 = "coldtrace.record/v1"

// Record is one traced run. Times inside it are nanoseconds since Start
// (the moment the command was released), so a record read on another
// machine needs no clock of its own.
type Record struct {
	Schema  string `json:"schema"`
	Version string `json:"coldtrace_version"`
	// Command holds exact bytes, which need not be UTF-8: when an
	// argument is not, the file also carries command_b64 (every
	// argument's base64), which readers take over command.
	Command    []string `json:"command"`
	CommandB64 []string `json:"command_b64,omitempty"`
	// Start is the wall-clock time the command was released.
	Start time.Time `json:"start"`
	// WallNS is from release to the command's exit.
	WallNS int64 `json:"wall_ns"`
	// ExitCode follows the shell's convention: 128+N for death by signal N,
	// 127 when the command could not be started.
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// StartError says why the command could not be started (exit code 127).
	StartError string `json:"start_error,omitempty"`
	// Interrupted is set when coldtrace itself was asked to stop (SIGINT,
	// SIGTERM, SIGHUP) before the command ended on its own.
	Interrupted bool `json:"interrupted,omitempty"`
	// Partial is set in a checkpoint: a record written while the run went
	// on. WallNS then ends at the checkpoint, and the exit code is not
	// known.
	Partial *Partial `json:"partial,omitempty"`
	// MadeCold is set when coldtrace made the run cold on purpose (run
	// --cold) and says how.
	MadeCold *MadeCold `json:"made_cold,omitempty"`

	User User `json:"user"`
	Host Host `json:"host"`
	// Labels are the run's own names for itself (--label k=v: host, rank,
	// job, model): metrics, pprof samples and `coldtrace merge` carry them.
	Labels map[string]string `json:"labels,omitempty"`

	// IntervalNS is the polling period: the length of each sample up to
	// Coarsened.FromNS.
	IntervalNS int64 `json:"interval_ns"`
	// Coarsened is set when a long run's later samples each sum several
	// polls (bounded memory); nil when every sample is one poll.
	Coarsened *Coarsening `json:"coarsened,omitempty"`
	// StartupNS is coldtrace's own cost before the command was released:
	// loading and attaching probes, starting the gated child.
	StartupNS int64 `json:"startup_ns"`

	Lost Lost `json:"lost"`
	// FillEnd says how the kernel side ended the fill intervals (the CPU
	// and waits of a read or fault that missed): FillEndTaskWork,
	// FillEndReadExit or FillEndNextLook. Empty in records made before it
	// was recorded. Two runs whose fills ended differently do not measure
	// a read's CPU alike.
	FillEnd string `json:"fill_end,omitempty"`
	// ReadExitsFromNS is when the syscall exit tracepoints that end
	// reads' fills (FillEndReadExit) went on, in ns since the run's
	// start: at the first fill that had to end lazily. Absent when none
	// did: no syscall tracepoint slowed the machine's other processes
	// for them.
	ReadExitsFromNS *int64 `json:"read_exits_from_ns,omitempty"`
	// ReadExitSpans are the intervals in which those tracepoints were
	// on: they come off once no read has filled a page for a quiet
	// spell, and on again at the next such fill. Empty when they never
	// went on.
	ReadExitSpans []ReadExitSpan `json:"read_exit_spans,omitempty"`
	// FillsEndedAtReturn counts the fills that, where the kernel refuses
	// task works, ended at their thread's return to user space as the
	// kernel's rseq_update tracepoint showed it (a thread with an rseq
	// area that switched out inside the fill, as a read waiting for its
	// disk does): exactly, as a task work ends them, and with no syscall
	// tracepoint on. The others end at a read exit or the next look.
	FillsEndedAtReturn uint64 `json:"fills_ended_at_return,omitempty"`
	// RseqReturnSpans are the intervals in which the program on
	// rseq_update that ends those fills was attached: from the first
	// fill that asked for it until none had for a quiet spell (the
	// machine's other processes pay its test at each return to user
	// space after a switch only then). Empty when none asked.
	RseqReturnSpans []ReadExitSpan `json:"rseq_return_spans,omitempty"`

	// Files are indexed by File.ID (its position); samples refer to them.
	Files     []File    `json:"files"`
	Processes []Process `json:"processes"`
	// Stacks are the Python stacks the run's processes were started from
	// (trace/pystack), interned: Process.Stack is 1 + an index here.
	Stacks []PyStack `json:"stacks,omitempty"`
	// SampleStacks names the stack numbers the samples' file deltas use
	// (FileDelta.Stacks): number n is 1 + the index here, and its value
	// is 1 + an index in Stacks, 0 for a stack never decoded.
	SampleStacks []int    `json:"sample_stacks,omitempty"`
	Threads      []Thread `json:"threads"`
	// Samples are the timeline; Encode writes them last, one at a time.
	Samples []Sample `json:"samples,omitempty"`
	// SampleStream, when set, is more of the timeline, after Samples,
	// that Encode writes one sample at a time without holding them all
	// decoded (a checkpoint's: the session keeps its samples packed). It
	// is neither encoded as such nor decoded.
	SampleStream SampleSource `json:"-"`

	Warnings  []string   `json:"warnings,omitempty"`
	Self      SelfCost   `json:"self"`
	JIT       *JIT       `json:"jit,omitempty"`
	GPU       *GPU       `json:"gpu,omitempty"`
	Downloads []Download `json:"downloads,omitempty"`
	// Silent are the connections that received nothing for SilentMinNS
	// while their process waited.
	Silent []SilentConnection `json:"silent_connections,omitempty"`
	// Machine is what the machine let the run use and what else ran on
	// it (trace/machine).
	Machine *Machine `json:"machine,omitempty"`
	// Attached is set when coldtrace attached to processes already
	// running (coldtrace attach); Start is then the moment of attach.
	Attached *Attached `json:"attached,omitempty"`
	// Marks cut the run into segments (coldtrace mark, COLDTRACE_MARK).
	Marks []Mark `json:"marks,omitempty"`
	// Ready is when the traced program was ready to serve (the mark
	// --ready named, the first mark, or the end of the first busy
	// stretch of an idle-split trace); compiles after it cost requests.
	Ready *Ready `json:"ready,omitempty"`
	// Untraced are the processes that left the trace at a secure exec
	// (a setuid program under sudo), in the order they left.
	Untraced []Untraced `json:"untraced,omitempty"`

	// fileIndex maps a file id to its position in Files, for records
	// whose ids are not their positions (Decode builds it; nil
	// otherwise). Read-only once built.
	fileIndex map[int]int
}

// ReadExitSpan is one interval in which the read exits (or, in
// Record.RseqReturnSpans, the program at the return to user space) were
// on, in ns since the run's start.
type ReadExitSpan struct {
	FromNS int64 `json:"from_ns"`
	// ToNS is when they came off, or the end of the run.
	ToNS int64 `json:"to_ns"`
	// Off says why they came off before the end ("": they stayed on).
	Off string `json:"off,omitempty"`
}

// How fill intervals ended (Record.FillEnd).
const (
	// FillEndTaskWork: at the entry's return to user space, by a task
	// work the miss scheduled; every entry, whatever its syscall.
	FillEndTaskWork = "task_work"
	// FillEndReadExit: the kernel refuses task works to tracing programs;
	// a fill in which its thread switched out ends at the return to user
	// space where rseq shows it (Record.FillsEndedAtReturn), a read's
	// other fills at the read family's syscall exits (reads and preads
	// of less than 64 KiB: at the next look), any other entry's (a
	// fault, execve) at the next look at the thread.
	FillEndReadExit = "read_exit"
	// FillEndNextLook: as FillEndReadExit without the read exits
	// (--no-read-exits): a read's copy of its last pages, after its
	// last page-cache event, is not in its fill unless its thread
	// switched out inside it.
	FillEndNextLook = "next_look"
)

// Partial says a record was written during the run, not at its end.
type Partial struct {
	// AtNS is when the checkpoint was taken, in ns since Start.
	AtNS int64 `json:"at_ns"`
	// Reason says why the record is partial.
	Reason string `json:"reason"`
}

// User is who the command ran as.
type User struct {
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	Name string `json:"name"`
	Home string `json:"home"`
}

// Host identifies the machine, so a diff of records from two machines can
// say so.
type Host struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	CPUs     int    `json:"cpus"`
	MemBytes uint64 `json:"mem_bytes"`
	PageSize int    `json:"page_size"`
}

// Lost counts what the kernel side could not record. Any non-zero value
// means the numbers are lower bounds; reports must show it.
type Lost struct {
	RingBuffer  uint64 `json:"ring_buffer"`
	FileTable   uint64 `json:"file_table"`
	ThreadTable uint64 `json:"thread_table"`
	Tracked     uint64 `json:"tracked_table"`
	Paths       uint64 `json:"paths"`
	// FillEnds counts fill intervals closed at their last event because
	// no task work could be scheduled for their return to user space.
	FillEnds uint64 `json:"fill_ends"`
	// Network counts connections and written files the network sensor
	// could not track or report (its tables were full): downloads are
	// then lower bounds.
	Network uint64 `json:"network,omitempty"`
	// Pages counts pages whose re-read or evictor could not be recorded
	// (a full table): re-reads and evictions are lower bounds.
	Pages uint64 `json:"pages,omitempty"`
}

// Total is the sum of every lost counter.
func (l Lost) Total() uint64 {
	return l.RingBuffer + l.FileTable + l.ThreadTable + l.Tracked + l.Paths + l.FillEnds + l.Network + l.Pages
}

// File is one (device, inode) the command touched through the page cache.
//
// PagesAccessed counts pages the read path returned (read, pread, readv,
// sendfile, splice) plus pages mapped by page faults and fault-around. A
// page can be counted more than once when it is read more than once.
// PagesMissed counts pages the command's threads inserted into the page
// cache (1<<order per inserted folio): they came from disk.
type File struct {
	ID  int    `json:"id"`
	Dev uint32 `json:"dev"` // kernel encoding: major<<20 | minor
	Ino uint64 `json:"ino"`
	// Gen is the inode's generation: a file created after another's
	// unlink freed its inode number has the same Dev and Ino and another
	// Gen, and its own row. 0 where the filesystem keeps none.
	Gen uint32 `json:"gen,omitempty"`
	// Path holds the name's exact bytes, which need not be UTF-8: JSON
	// carries them in path_b64 then (File.MarshalJSON).
	Path string `json:"path"`
	// NameCut is set when the kernel could not give the whole path (longer
	// than PATH_MAX) and no other source did: Path is then not a name
	// that can be opened.
	NameCut       bool   `json:"name_cut,omitempty"`
	SizeBytes     int64  `json:"size_bytes"`
	PagesAccessed uint64 `json:"pages_accessed"`
	PagesMissed   uint64 `json:"pages_missed"`
	// PagesEvicted counts pages of this file dropped from the page cache
	// during the run, by anyone (kswapd, DAMON, fadvise).
	PagesEvicted uint64 `json:"pages_evicted"`
	// PagesCreated counts pages the command's writes added to the page
	// cache: new data, not read from disk, so not misses. For a file the
	// run created, the holes it read (zero-filled pages never written)
	// count here too.
	PagesCreated  uint64 `json:"pages_created,omitempty"`
	BytesFromDisk uint64 `json:"bytes_from_disk"`
	// IOWaitNS is thread-time blocked on block I/O while reading this file.
	IOWaitNS int64 `json:"io_wait_ns"`
	// MissCPUNS is on-CPU thread-time inside read syscalls and page faults
	// that missed the cache for this file: the kernel work of filling it.
	MissCPUNS int64 `json:"miss_cpu_ns"`
	// FillWaitNS is off-CPU thread-time, other than I/O wait, inside
	// kernel entries that filled the cache for this file: run-queue
	// waits and other blocking a warm read would not have had.
	FillWaitNS int64 `json:"fill_wait_ns,omitempty"`
	// PagesReread counts pages the command read from disk again after
	// they were evicted during the run (part of PagesMissed).
	PagesReread uint64 `json:"pages_reread,omitempty"`
	// PagesShared counts pages the command read while a process outside
	// the run was reading the file from disk: they came from disk through
	// it, and the command waited for them. They are not hits a rerun
	// could expect.
	PagesShared uint64 `json:"pages_shared,omitempty"`
	// DirectBytes counts bytes the command read from this file with
	// direct I/O (O_DIRECT), which bypasses the page cache: not in
	// PagesMissed or BytesFromDisk, and read from disk again on every run.
	DirectBytes uint64 `json:"direct_bytes,omitempty"`
	// DirectWaitNS is the part of IOWaitNS spent while those direct
	// reads were in flight: recurring, not avoided by a warm cache.
	DirectWaitNS int64 `json:"direct_wait_ns,omitempty"`
	// Evictors say who dropped PagesEvicted, heaviest first.
	Evictors []Evictor `json:"evictors,omitempty"`
	// Inserters are the processes outside the run that read this file
	// from disk during it, heaviest first.
	Inserters []Inserter `json:"inserters,omitempty"`
	// HostPath is the file's path on the host when Path, the one the
	// process used in its own mount namespace, is not valid there or
	// names another mount.
	HostPath string `json:"host_path,omitempty"`
	// FirstPath is the name the file was first seen under when the run
	// renamed it, in any directory (Path is then its name at the end of
	// the run); empty when it kept its name or its final name could not
	// be found.
	FirstPath string `json:"first_path,omitempty"`
	// Stacks split the file's fill time over the Python stacks that
	// filled it, most time first; the rest of its time took no stack.
	Stacks []StackCharge `json:"stacks,omitempty"`
	// Order says how the misses came (read or fault, in which order);
	// nil when the sensor kept none for this file.
	Order *ReadOrder `json:"order,omitempty"`
	// FS is the type of the filesystem the file is on ("ext4", "fuse",
	// "fuse.sshfs", "nfs4"), from the mount table by its device.
	FS string `json:"fs,omitempty"`
}

// The kinds of evictor.
const (
	EvictSyscall       = "syscall"        // a process's fadvise, truncate, unlink, ... (Syscall)
	EvictDirectReclaim = "direct_reclaim" // a thread in global direct reclaim
	EvictMemcgReclaim  = "memcg_reclaim"  // a thread reclaiming for its memory cgroup's limit
	EvictKswapd        = "kswapd"         // kswapd: global memory pressure
	EvictKdamond       = "kdamond"        // DAMON
	EvictKernel        = "kernel"         // another kernel thread, or outside a syscall
)

// Evictor is one context that evicted pages of a file during the run.
type Evictor struct {
	Kind string `json:"kind"`
	PID  int32  `json:"pid"`
	Comm string `json:"comm"`
	// Traced: the process was part of the run.
	Traced bool `json:"traced"`
	// Syscall names the syscall of an EvictSyscall evictor.
	Syscall string `json:"syscall,omitempty"`
	// Cgroup is the process's memory cgroup, when it could be read.
	Cgroup string `json:"cgroup,omitempty"`
	Pages  uint64 `json:"pages"`
}

// Inserter is a process outside the run that read pages of a file from
// disk into the page cache during the run.
type Inserter struct {
	PID   int32  `json:"pid"`
	Comm  string `json:"comm"`
	Pages uint64 `json:"pages"`
}

// Process is one traced process (thread group).
type Process struct {
	PID  int32  `json:"pid"`
	PPID int32  `json:"ppid"`
	Comm string `json:"comm"`
	// Exe and Args hold exact bytes, which need not be UTF-8: JSON
	// carries them in exe_b64 and args_b64 (every argument) then
	// (Process.MarshalJSON).
	Exe  string   `json:"exe,omitempty"`
	Args []string `json:"args,omitempty"`
	// ArgsCut is set when argv was longer than coldtrace could copy at
	// exec (4 KiB) and the process was gone before its whole argv could
	// be read: Args holds its first arguments, the last one cut.
	ArgsCut bool `json:"args_cut,omitempty"`
	// ExeCut is set when the executable's name as exec was given it was
	// longer than coldtrace copies at exec (255 bytes) and the process
	// was gone before /proc/PID/exe could name it: Exe is its first 255
	// bytes.
	ExeCut  bool  `json:"exe_cut,omitempty"`
	StartNS int64 `json:"start_ns"`
	// EndNS is 0 when the process was still running when the run ended;
	// for a process in Record.Untraced it is when it left the trace (it
	// ran on, and Exited is false). An exited process ends at the last
	// switch out of its threads when each was seen, else at its exit
	// (the command's first process: when wait(2) reported it).
	EndNS    int64 `json:"end_ns,omitempty"`
	ExitCode int   `json:"exit_code"`
	Exited   bool  `json:"exited"`
	Threads  int   `json:"threads"`
	CPUNS    int64 `json:"cpu_ns"`
	OffCPUNS int64 `json:"offcpu_ns"`
	IOWaitNS int64 `json:"io_wait_ns"`
	// RunQueueNS is time runnable but not running (preempted, waiting for
	// a CPU); it is part of OffCPUNS.
	RunQueueNS int64 `json:"runqueue_ns"`
	MissCPUNS  int64 `json:"miss_cpu_ns"`
	// FillWaitNS is off-CPU time, other than I/O wait, inside kernel
	// entries that filled the page cache (part of OffCPUNS);
	// FillRunQueueNS is its run-queue part (part of RunQueueNS too).
	FillWaitNS     int64 `json:"fill_wait_ns,omitempty"`
	FillRunQueueNS int64 `json:"fill_runqueue_ns,omitempty"`
	// Stack is 1 + the index in Record.Stacks of the Python stack that
	// started the process (the stack of the Python thread that forked it
	// or an ancestor); 0 when none.
	Stack int `json:"stack,omitempty"`
}

// Thread is one traced thread's totals.
type Thread struct {
	TID        int32  `json:"tid"`
	PID        int32  `json:"pid"`
	Comm       string `json:"comm"`
	CPUNS      int64  `json:"cpu_ns"`
	OffCPUNS   int64  `json:"offcpu_ns"`
	IOWaitNS   int64  `json:"io_wait_ns"`
	RunQueueNS int64  `json:"runqueue_ns"`
	MissCPUNS  int64  `json:"miss_cpu_ns"`
	// FillWaitNS and FillRunQueueNS: as in Process.
	FillWaitNS     int64 `json:"fill_wait_ns,omitempty"`
	FillRunQueueNS int64 `json:"fill_runqueue_ns,omitempty"`
}

// Coarsening says how a long run's timeline was kept in bounded memory:
// the samples ending after FromNS sum PollsPerSample polls each (fewer
// near a mark, and the last one whatever was left); their totals are the
// polls' sums.
type Coarsening struct {
	FromNS         int64 `json:"from_ns"`
	PollsPerSample int   `json:"polls_per_sample"`
	// Polls is the number of polls the samples sum.
	Polls int `json:"polls"`
}

// Sample holds what changed from the previous sample's EndNS (0 for the
// first) to its own: one polling interval, or several where the record
// is Coarsened. Threads and files with nothing to report are left out; a thread
// absent from a sample was off-CPU and not waiting on I/O for all of it.
type Sample struct {
	EndNS   int64         `json:"t"`
	Threads []ThreadDelta `json:"th,omitempty"`
	Files   []FileDelta   `json:"f,omitempty"`
}

// ThreadDelta is one thread's time in one interval, by state.
type ThreadDelta struct {
	TID      int32 `json:"tid"`
	PID      int32 `json:"pid"`
	CPUNS    int64 `json:"cpu,omitempty"`
	IOWaitNS int64 `json:"io,omitempty"`
	// MissCPUNS is the part of CPUNS spent filling the page cache.
	MissCPUNS  int64 `json:"miss,omitempty"`
	RunQueueNS int64 `json:"rq,omitempty"`
	// OtherWaitNS is off-CPU time that is neither I/O wait nor run queue.
	OtherWaitNS int64 `json:"wait,omitempty"`
	// FillWaitNS is the part of RunQueueNS and OtherWaitNS spent inside
	// kernel entries that filled the page cache; FillRunQueueNS is its
	// part of RunQueueNS.
	FillWaitNS     int64 `json:"fwait,omitempty"`
	FillRunQueueNS int64 `json:"frq,omitempty"`
}

// FileDelta is one file's activity in one interval. File is a File.ID.
type FileDelta struct {
	File          int    `json:"id"`
	PagesAccessed uint64 `json:"acc,omitempty"`
	PagesMissed   uint64 `json:"miss,omitempty"`
	PagesEvicted  uint64 `json:"evict,omitempty"`
	IOWaitNS      int64  `json:"io,omitempty"`
	MissCPUNS     int64  `json:"mcpu,omitempty"`
	FillWaitNS    int64  `json:"fwait,omitempty"`
	// DirectWaitNS is the part of IOWaitNS spent on direct I/O.
	DirectWaitNS int64 `json:"dwait,omitempty"`
	// PagesCreated counts pages the command's writes added to the page
	// cache in the interval: what a download's destination is matched
	// by, poll by poll.
	PagesCreated uint64 `json:"new,omitempty"`
	// Stacks are the Python stacks the file's fill CPU and waits were
	// charged to in the interval, most first, at most MaxSampleStacks.
	Stacks []SampleStack `json:"stk,omitempty"`
}

// MaxSampleStacks bounds FileDelta.Stacks: a timeline slice names the
// stack with the most time in it, and a few runners-up keep a sum of
// intervals close to right.
const MaxSampleStacks = 4

// SampleStack is a stack's part of a file's time in one interval.
type SampleStack struct {
	// N is 1 + an index in Record.SampleStacks.
	N  int   `json:"n"`
	NS int64 `json:"ns"`
}

// SortSampleStacks orders a file's stacks in an interval, most time
// first (then by number, so that equal ones keep one order).
func SortSampleStacks(st []SampleStack) {
	slices.SortFunc(st, func(x, y SampleStack) int {
		if x.NS != y.NS {
			return cmp.Compare(y.NS, x.NS)
		}
		return cmp.Compare(x.N, y.N)
	})
}

// SampleStackAt is the Stacks index (1 + index, as StackAt takes) of
// sample stack number n, 0 when unknown.
func (r *Record) SampleStackAt(n int) int {
	if r == nil || n <= 0 || n > len(r.SampleStacks) {
		return 0
	}
	return r.SampleStacks[n-1]
}

// SelfCost is what coldtrace itself cost while tracing.
type SelfCost struct {
	CPUNS        int64  `json:"cpu_ns"`
	MaxRSSBytes  uint64 `json:"max_rss_bytes"`
	EventsSeen   uint64 `json:"events_seen"`
	BPFRunTimeNS uint64 `json:"bpf_run_time_ns,omitempty"`
	// SwitchInsUnseen counts switches to a traced thread that its
	// sched_switch program never saw: the thread was switched out twice
	// in a row (under CPU contention, a few per thousand switches on
	// the kernels measured). Each such interval was split into its wait
	// and its run by the kernel's own on-CPU clock of the thread, so
	// thread times stay whole; only the wait's start is approximate.
	SwitchInsUnseen uint64 `json:"switch_ins_unseen,omitempty"`
	// SwitchOutsUnseen counts switches from a traced thread its
	// sched_switch program never saw: the thread was switched in while
	// still on a CPU by the program's account. The interval since its
	// last switch in is split the same way, into its run and a wait.
	SwitchOutsUnseen uint64 `json:"switch_outs_unseen,omitempty"`
	// Python stacks (trace/pystack): walks of a thread's frames, stacks
	// taken again without a walk (its two innermost frames unchanged,
	// the innermost with the same first local; or, that local changed,
	// every frame's code and instruction unchanged), and distinct
	// stacks stored.
	PyWalks     uint64 `json:"python_walks,omitempty"`
	PyReuses    uint64 `json:"python_reuses,omitempty"`
	PyNewStacks uint64 `json:"python_new_stacks,omitempty"`
}
