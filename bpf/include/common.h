/* Shared by every coldtrace BPF object: the per-thread state whose
 * presence is the tracked set, the per-thread counters, and the lost-event
 * counters. The scheduler object (bpf/sched) creates the per-thread maps;
 * the other objects get them from it through map replacement at load
 * time, so there is one tracked set. Each object counts its own drops. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

/* A kernel pointer as an untrusted BTF pointer of type btf_id: its fields
 * load directly (a fault reads as zero), no probe-read helper per field. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* A tracepoint's trusted BTF argument as a read-only view of the same
 * object. Each load of a pointer field from a trusted pointer makes the
 * verifier look up "<type>__safe_trusted" and its kin by name, a linear
 * search of the kernel's BTF, at every visit of that load; through the
 * view it does not (measured on 6.18: a third of the page-cache object's
 * verification). The loads compile to the same faulting loads and the
 * verifier drops the cast, so it costs nothing at run time. Helpers that
 * need a trusted pointer (task storage) still take the argument. */
#define BTF_VIEW(ptr, type) ((type *)bpf_rdonly_cast((ptr), bpf_core_type_id_kernel(type)))

#define MAX_THREADS 65536
#define MAX_FILES 65536

/* thread.flags (published, in the threads array) and tstate.flags (the
 * current kernel entry, and what the task runs: task storage only). Exported to Go by bpf2go. */
enum thread_flag {
	TF_ON_CPU = 1 << 0,
	TF_OUT_IOWAIT = 1 << 1,
	TF_OUT_RUNNABLE = 1 << 2,
	TF_FAULT_TS = 1 << 3,    /* tstate: fault_ts holds the start of the latest file fault */
	TF_END_PENDING = 1 << 4, /* tstate: a task work will close the fill interval at the return to user */
	TF_MISSED = 1 << 5,      /* tstate: the current kernel entry fills the page cache: its CPU time is charged */
	TF_EXITED = 1 << 6,
	TF_LAZY_END = 1 << 7, /* tstate: no task work closes the entry's fill; a later look at the thread that finds it in another entry does (entry, seen_ts) */
	TF_DEAD = 1 << 8, /* switched out for the last time: the slot may be reused */
	TF_OUT_FILL = 1 << 9, /* switched out, not for I/O, inside a kernel entry that fills the page cache */
	TF_PYTHON = 1 << 10,  /* tstate: the thread runs a Python interpreter (executed one, or forked from one) */
	TF_DIRECT = 1 << 11,  /* tstate: the current kernel entry queued direct-I/O reads of dio_file */
	TF_OUT_DIRECT = 1 << 12, /* switched out for I/O while its direct-I/O reads were in flight */
	TF_OUT_URING = 1 << 13,  /* switched out waiting for io_uring completions (counted as I/O wait only for direct reads) */
	TF_RETURNING = 1 << 14,  /* tstate, with TF_LAZY_END: the filling syscall has returned; a switch out on its way back to user space is still the fill's */
	TF_RSEQ_THREAD = 1 << 15, /* tstate, with TF_LAZY_END: the thread has an rseq area, so a switch out inside the fill makes its return to user space seen (rseq_update) */
	TF_RSEQ_END = 1 << 16,    /* tstate, with TF_RSEQ_THREAD: switched out inside the fill: its entry's return ends it (bpf/pagecache: on_rseq_return) */
	TF_ASK_EXIT = 1 << 17,    /* tstate: a fill of a thread with an rseq area ended at the next look, its return unseen: its read syscall's exit is to be asked for (bpf/pagecache) */
	TF_SMALL_READ = 1 << 18,  /* tstate, with TF_RSEQ_THREAD: the fill's syscall is a read or pread64 of less than SMALL_READ bytes: returned unseen, it asks for no exit */
};

/* Indices into each object's lost counters. Exported to Go by bpf2go. */
enum lost_kind {
	LOST_RINGBUF = 0,
	LOST_FILES = 1,
	LOST_THREADS = 2,
	LOST_FILL_END = 3, /* a fill interval closed at its last event, not at the return to user */
	LOST_PAGES = 4, /* the run_pages or evictors table was full: re-reads or evictors undercounted */
	LOST_STACKS = 5, /* the file_stacks table was full: a fill's time went to its file without its stack */
	LOST_KINDS = 6,
};

/* A file: its device, inode number and the inode's generation. An inode
 * number freed by an unlink is given to the next new file (Python's
 * failed .pyc write and the next module's temporary file shared one, and
 * the second file's counts, name and compile went to the first's row);
 * i_generation, random for each new inode on ext4, tmpfs, xfs and btrfs,
 * tells them apart at no cost to the key's size (it was padding). 0 on a
 * filesystem that keeps none. */
struct file_key {
	__u32 dev; /* super_block s_dev, kernel encoding major<<20|minor */
	__u32 gen; /* inode i_generation */
	__u64 ino;
};

/* dev and gen in one scalar, for global functions' five arguments. */
static __always_inline __u64 key_dev_gen(const struct file_key *k)
{
	return k->dev | ((__u64)k->gen << 32);
}

/* Per-thread state lives in two places:
 *
 * - tstate, task-local storage: its presence is what "tracked" means
 *   (fork creates it for the child, user space seeds the first one
 *   through a pidfd), and it holds what only the probes need, the state
 *   of the current kernel entry. One cheap lookup from the task pointer,
 *   where a hash lookup by tid cost a hash and a bucket walk on every
 *   syscall and context switch, tracked or not.
 * - threads[tstate.slot], an array user space reads every poll: the
 *   cumulative counters and the scheduling state it needs to extend the
 *   ongoing interval. Array lookups are inlined by the verifier.
 *
 * Slots come from free_slots (recycled by user space once a thread is
 * TF_DEAD and read) or else from next_slot. */
struct tstate {
	__u32 slot;
	__u32 flags;
	__u32 tgid;
	/* Whether the thread's mount namespace is another than coldtrace's,
	 * as of its nsproxy below (bpf/pagecache: send_view): a namespace
	 * changes only with a new nsproxy (unshare, setns), so one load
	 * tells whether the three behind it need reading again. */
	__u32 foreign_ns;
	__u64 mark_ts; /* start of on-CPU fill time not yet charged */
	__u64 fault_ts; /* entry to filemap_fault of the latest file fault */
	struct file_key cur; /* file of the latest page-cache event */
	/* Pages this thread inserted and has not yet consumed: a read that
	 * returns them pays for the miss (on VMs the first touch of a fresh
	 * page, in the copy to user space, is much of the cost). */
	struct file_key ra_file;
	__u64 ra_lo;
	__u64 ra_hi;
	/* The read in progress (bpf/pagecache: count_read): its file, its
	 * syscall and arguments, the index of its latest batch, and one past
	 * the highest page counted for it. */
	struct file_key rd_file;
	__u64 rd_sig;
	__u64 rd_index;
	__u64 rd_next;
	/* The latest range of a file this thread's page faults mapped or
	 * faulted (bpf/pagecache: map_new_pages): a fault the fault-around
	 * just before it could not map (its page was not in the page cache)
	 * reports a page of that range again. */
	struct file_key map_file;
	__u64 map_lo;
	__u64 map_hi;
	/* The file whose direct-I/O reads the current kernel entry queued
	 * (TF_DIRECT; bpf/pagecache, block_bio_queue): its I/O waits are
	 * that file's, as direct I/O. */
	struct file_key dio_file;
	/* In the process's leader only: the file of the process's latest
	 * direct read by any thread, and when it was queued. A thread
	 * waiting for io_uring completions while one was queued waits for
	 * it (an io-wq worker queues the read, the submitter waits). */
	struct file_key async_file;
	__u64 async_ts;
	/* The Python stack (bpf/include/pywalk.h) of the open fill interval,
	 * taken where it opened (bpf/pagecache: open_fill) and cleared where
	 * it closes; 0 outside a fill or for a thread without one. */
	__u64 fill_stack;
	/* The thread's last walk (py_stack_reuse): its thread state, its two
	 * innermost frames and their instructions, the innermost's first
	 * local, and the stack they gave. Unchanged frames reuse the stack
	 * without a walk. */
	__u64 py_ts;
	__u64 py_f0, py_i0, py_f1, py_i1, py_l0;
	__u64 py_last;
	/* The last walk's outermost frame within PY_CHAIN_BLOCK bytes
	 * below the innermost's fields (0: none): where one read of the
	 * frames for py_same_chain begins. */
	__u64 py_low;
	/* Where the kernel refuses task works to tracing programs
	 * (TF_LAZY_END): the kernel entry the open fill or direct read
	 * belongs to (bpf/include/files.h: entry_of), and when the thread
	 * was last seen in it. */
	__u64 entry;
	__u64 seen_ts;
	__u64 nsproxy;
	/* With TF_RSEQ_THREAD: the thread's read syscalls completed when
	 * the fill began (ioac.syscr), which tells a read that returned from
	 * one still copying (a fault in its copy to user space moves the
	 * entry's counters, not this). */
	__u64 fill_reads;
};

struct thread {
	__u32 tid; /* 0: free slot */
	__u32 tgid;
	__u32 flags;
	/* Switch-ins the sched_switch program did not see (under load, a
	 * thread is sometimes switched out twice in a row: cause not found).
	 * The interval since the last switch out is then split by exec_ns. */
	__u32 unseen_ins;
	__u64 last_ts; /* last switch in (on CPU) or out (off CPU) */
	struct file_key wait_file; /* file blocked on (I/O wait, or a wait inside its fill) at the last switch out */
	__u64 cpu_ns;
	__u64 iowait_ns;
	__u64 runq_ns;
	__u64 other_ns;
	__u64 miss_cpu_ns;
	__u64 switches;
	/* Off-CPU time, not I/O wait, inside a kernel entry that fills the
	 * page cache (part of runq_ns + other_ns), and its run-queue part. */
	__u64 fill_wait_ns;
	__u64 fill_runq_ns;
	/* While a fill interval is open: the time from which its on-CPU time
	 * is not yet in miss_cpu_ns (0 otherwise). The poller adds the
	 * ongoing part, as it does for cpu_ns, so that a long fill is not
	 * seen as CPU in one interval and as fill in the next. */
	__u64 fill_mark;
	/* The kernel's own on-CPU clock of the thread (se.sum_exec_runtime)
	 * at its last seen switch (out or in): what splits an interval whose
	 * switch in or out was not seen into its wait and its run. */
	__u64 exec_ns;
	/* The Python stack of the fill wait_file names (tstate.fill_stack):
	 * its waits are charged to (file, stack) too; 0 for none. */
	__u64 wait_stack;
	/* Switch-outs the sched_switch program did not see: the thread was
	 * switched in while still flagged on a CPU (the same untraced
	 * switches as unseen_ins, seen from the other side). The interval
	 * since its last switch in is then split by exec_ns, which is also
	 * set at each switch in for this. */
	__u32 unseen_outs;
	__u32 pad;
	/* The kernel's run-queue clock of the thread (sched_info.run_delay,
	 * with a run-queue wait about to end added) at its last seen
	 * switch in: what tells the run-queue part of a wait whose switch
	 * out was not seen from a sleep. */
	__u64 rdelay_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tstate);
} task_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Types only user space reads (ring-buffer records, enums) reach the
 * object's BTF, and so bpf2go's -type, through one unused pointer each. */
#define BTF_ANCHOR(type, name) type *_btf_anchor_##name __attribute__((unused))

BTF_ANCHOR(enum thread_flag, thread_flag);
BTF_ANCHOR(enum lost_kind, lost_kind);

static __always_inline void count_lost(enum lost_kind kind)
{
	__u32 k = kind;
	__u64 *v = bpf_map_lookup_elem(&lost, &k);
	if (v)
		*v += 1;
}

/* Whether ring is at least half full, relative to its size, which user
 * space may shrink at load time. */
static __always_inline bool ring_half_full(void *ring)
{
	return bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) >= bpf_ringbuf_query(ring, BPF_RB_RING_SIZE) / 2;
}

/* The wake-up flag for a record submitted to ring: none while the ring is
 * less than half full (user space drains it on a timer anyway: a wake-up
 * costs microseconds, an IPI on a VM), a forced one once it is. Not 0:
 * the kernel's default wakes the reader only when it has read everything
 * before the record, never with half a ring waiting. */
static __always_inline __u64 ring_wakeup(void *ring)
{
	return ring_half_full(ring) ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* A bit per process (tgid) any of whose threads is tracked: set before the
 * thread's task storage is made (track(), and user space for the threads
 * it seeds), never cleared during a run (a later process given the same
 * number pays the storage lookup, no more). Programs on tracepoints every
 * process hits (page-cache reads, insertions, context switches, the path
 * syscalls) test it first: an inlined array load, where the task-storage
 * lookup is a helper call that took an untraced cached pread's program
 * from 48 ns (empty) to 90. 2^22 bits: PID_MAX_LIMIT, whatever pid_max
 * is set to. Mappable, so that user space sets bits atomically beside the
 * kernel's. */
#define TRACKED_WORDS (1u << 16)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, TRACKED_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} tracked_tgids SEC(".maps");

/* Whether a thread of process tgid may be tracked (false: it is not). */
static __always_inline bool maybe_tracked(__u32 tgid)
{
	__u32 word = (tgid >> 6) & (TRACKED_WORDS - 1);
	__u64 *w = bpf_map_lookup_elem(&tracked_tgids, &word);
	return w && (*w & (1ull << (tgid & 63)));
}

static __always_inline void mark_tracked(__u32 tgid)
{
	__u32 word = (tgid >> 6) & (TRACKED_WORDS - 1);
	__u64 *w = bpf_map_lookup_elem(&tracked_tgids, &word);
	if (w)
		__sync_fetch_and_or(w, 1ull << (tgid & 63));
}

/* task is a BTF pointer (bpf_task_storage_get takes no other): its tgid
 * is a plain load, where BPF_CORE_READ is a helper call (on_switch, two
 * tests a switch, went from 150 to 190 ns with it). */
static __always_inline struct tstate *task_state(struct task_struct *task)
{
	if (!maybe_tracked(task->tgid))
		return NULL;
	return bpf_task_storage_get(&task_states, task, 0, 0);
}

static __always_inline struct tstate *current_state(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (!maybe_tracked(task->tgid))
		return NULL;
	return bpf_task_storage_get(&task_states, task, 0, 0);
}

extern struct task_struct *bpf_task_from_pid(__s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

/* The state of the leader of process tgid (a global pid), found by its
 * number rather than through a task's group_leader: a pointer loaded
 * from a trusted task makes the verifier search the kernel's BTF by name
 * (three linear searches of its 125,000 types) at every visit of the
 * load, some 6 ms of every start in the scheduler's programs. At run
 * time a pid lookup, where the callers are rare paths (io_uring). */
static __always_inline struct tstate *leader_state(__u32 tgid)
{
	if (!maybe_tracked(tgid))
		return NULL;
	struct task_struct *leader = bpf_task_from_pid(tgid);
	if (!leader)
		return NULL;
	struct tstate *s = bpf_task_storage_get(&task_states, leader, 0, 0);
	bpf_task_release(leader);
	return s;
}

static __always_inline struct thread *slot_thread(struct tstate *s)
{
	__u32 slot = s->slot;
	return bpf_map_lookup_elem(&threads, &slot);
}

/* The thread's on-CPU time up to now: the core's counter plus the
 * current stint. Called only in the thread itself, which is therefore on
 * a CPU even when its switch in never reached the scheduler program
 * (unseen_ins): then the kernel's own clock of the thread says how much
 * of the time since its switch out it ran, as that switch out will
 * count it. Trusting the flag alone read a call that spun 100 ms right
 * after such a switch in as 0 ms of CPU. */
static __always_inline __u64 thread_cpu(struct thread *t, __u64 now)
{
	if (!t)
		return 0;
	__u64 cpu = t->cpu_ns;
	if (now <= t->last_ts)
		return cpu;
	if (t->flags & TF_ON_CPU)
		return cpu + now - t->last_ts;
	if (!t->last_ts)
		return cpu;
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 exec = BPF_CORE_READ(task, se.sum_exec_runtime);
	__u64 run = exec > t->exec_ns ? exec - t->exec_ns : 0;
	if (run > now - t->last_ts)
		run = now - t->last_ts;
	return cpu + run;
}
