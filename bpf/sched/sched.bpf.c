//go:build ignore

/* coldtrace's scheduler sensor: which threads belong to the run (fork
 * extends the tracked set), their on- and off-CPU time split into
 * running, run queue, I/O wait and other waits, and the process events
 * user space needs to name them (fork, exec with argv, exit). Counters
 * are aggregated in the threads array, which user space polls; only the
 * process events go through the ring buffer.
 *
 * This object creates the shared maps (task_states, threads, files); the
 * page-cache and JIT objects take them as map replacements. At a switch
 * it also does the page cache's share of the accounting that only a
 * switch can do: a fill interval stops while its thread is off the CPU,
 * and a block-I/O wait is charged to the file last read. Tracepoints
 * only: kprobes and fentry are not available on the kernels this was
 * built for. */

#include "common.h"
#include "files.h"
#include "syscall64.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define FILENAME_LEN 256
#define ARGS_LEN 4096
#define TASK_DEAD_ 0x80 /* TASK_DEAD in prev_state: prev's last switch out */

/* task_event.kind. Exported to Go by bpf2go. */
enum task_event_kind {
	EV_FORK = 1,
	EV_EXEC = 2,
	EV_EXIT = 3,
	EV_UNTRACK = 4, /* a secure exec: the task left the tracked set */
};

/* task_event.reason of an EV_UNTRACK: why the exec was a secure one.
 * Exported to Go by bpf2go. */
enum secure_exec_reason {
	SX_SETUID = 1,
	SX_SETGID = 2,
	SX_CAPS = 3, /* file capabilities, or another reason the kernel had (an LSM's) */
};

struct task_event {
	__u32 kind;
	__u32 pid;
	__u32 tid;
	__u32 ppid;
	__u64 ts;
	__s32 exit_code;
	__u32 reason; /* EV_UNTRACK: enum secure_exec_reason */
	char comm[16];
	char filename[FILENAME_LEN];
	__u32 args_len;
	__u32 args_total; /* argv's whole length: more than args_len when it was cut */
	char args[ARGS_LEN]; /* argv, NUL-separated, read at exec */
};

BTF_ANCHOR(struct task_event, task_event);

/* Events without argv (fork, exit, untrack) are sent without its buffer. */
#define TASK_EVENT_HEAD offsetof(struct task_event, args)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct task_event);
} exec_scratch SEC(".maps");
BTF_ANCHOR(enum task_event_kind, task_event_kind);
BTF_ANCHOR(enum secure_exec_reason, secure_exec_reason);

/* Set by user space when coldtrace acts for a real root login: root may
 * read whatever a setuid program reads, so its secure execs stay traced.
 * Otherwise (sudo, doas, pkexec) a secure exec leaves the trace: what a
 * setuid program reads with its privileges is not the invoking user's to
 * see, not even as names, sizes and timings. */
const volatile __u32 trace_secure_exec = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* Slots of threads that are gone, pushed by user space once it has read
 * their last counters; fork takes one before growing next_slot. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, MAX_THREADS);
	__type(value, __u32);
} free_slots SEC(".maps");

/* Fresh slots: CPU c hands out 1 + c, 1 + c + ncpus, ... (slot 0 is the
 * seed's, written by user space), counting in its own element, so no
 * atomic is needed. User space reads the arrays up to the largest. */
const volatile __u32 ncpus = 1;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} next_slot SEC(".maps");

/* Syscalls whose I/O waits are not page-cache reads: their iowait is not
 * put on the last file read. */
static __always_inline bool syncs_files(long id)
{
	switch (id) {
	case NR_fsync:
	case NR_fdatasync:
	case NR_sync:
	case NR_sync_file_range:
	case NR_syncfs:
		return true;
	}
	return writes_files(id);
}

/* Whether the run has read pages of the file from disk: a thread of it
 * inserted some, or read some an untraced process was inserting. Only
 * then may a wait in a read or a fault that did not itself miss be for
 * that file's pages being read in. A folio lock taken by anyone else
 * (reclaim scanning the page, migration, a writer overwriting it) makes
 * the reader wait in I/O as well, with no disk read of the file behind
 * it: seen as 0.3 ms of I/O wait on a binary whose every page was a hit.
 * Such a wait is I/O outside the page cache. */
static __always_inline bool filled_by_run(struct file_key *k)
{
	struct file_stats *fs = bpf_map_lookup_elem(&files, k);
	return fs && (fs->missed || fs->shared);
}

/* A file fault waits for its page within this long of its filemap_fault. */
#define FAULT_WAIT_NS (1000 * 1000)

/* What an I/O wait starting now is for: the file of the fill the kernel
 * entry is in (a page-cache miss: the thread waits for the pages it is
 * inserting), the file whose direct-I/O reads the entry queued, the file
 * a read syscall reads or a file fault just touched (pages another
 * thread is reading in) where the run has read that file from disk. Any
 * other I/O wait (a sync, a write's throttling, a read the page cache
 * does not see, a folio lock held by reclaim) names no file: the
 * thread's last page-cache file has nothing to do with it, and user
 * space shows it as I/O outside the page cache. Returns TF_OUT_DIRECT
 * for a direct-I/O wait. */
static __always_inline __u32 wait_cause(struct tstate *s, struct thread *t, struct task_struct *prev, __u64 now)
{
	struct file_key none = {};
	t->wait_file = none;
	t->wait_stack = 0;
	long nr = current_syscall(prev);
	if (syncs_files(nr))
		return 0;
	if (s->flags & TF_MISSED) {
		t->wait_file = s->cur;
		t->wait_stack = s->fill_stack;
		return 0;
	}
	if (s->flags & TF_DIRECT) {
		t->wait_file = s->dio_file;
		return TF_OUT_DIRECT;
	}
	struct file_key k = {};
	if (nr < 0) {
		if ((s->flags & TF_FAULT_TS) && now >= s->fault_ts && now - s->fault_ts < FAULT_WAIT_NS)
			k = s->cur;
	} else {
		struct file *f = syscall_read_file(prev);
		if (f) {
			struct inode *inode = BPF_CORE_READ(f, f_mapping, host);
			k.dev = BPF_CORE_READ(inode, i_sb, s_dev);
			k.ino = BPF_CORE_READ(inode, i_ino);
			k.gen = BPF_CORE_READ(inode, i_generation);
		}
	}
	if (k.ino && filled_by_run(&k))
		t->wait_file = k;
	return 0;
}

/* A wait for io_uring completions (TF_OUT_URING) during which a thread of
 * task's process queued direct reads was for them: the file of the
 * latest, as direct I/O (the requests complete asynchronously; the
 * submitter's wait is their time). Returns whether it was. */
static __always_inline bool charge_uring_wait(struct thread *t, struct task_struct *task, __u64 d)
{
	struct tstate *ls = leader_state(task->tgid);
	if (!ls || !ls->async_ts || ls->async_ts < t->last_ts || !ls->async_file.ino)
		return false;
	t->iowait_ns += d;
	struct file_stats *fs = bpf_map_lookup_elem(&files, &ls->async_file);
	if (fs) {
		__sync_fetch_and_add(&fs->iowait_ns, d);
		__sync_fetch_and_add(&fs->direct_wait_ns, d);
	}
	return true;
}

/* The run queue task's CFS queue is on (its CPU's), read through a view
 * of the task; NULL where the kernel does not say. */
static __always_inline struct rq *task_rq_view(struct task_struct *task)
{
	if (!bpf_core_field_exists(task->se.cfs_rq))
		return NULL;
	struct cfs_rq *cfs = task->se.cfs_rq;
	if (!cfs || !bpf_core_field_exists(cfs->rq))
		return NULL;
	return cfs->rq;
}

/* The kernel's run-queue clock of task (sched_info.run_delay) as of now,
 * at a sched_switch on this CPU: the switch adds a wait that ends here to
 * run_delay only after the tracepoint (sched_info_arrive, in
 * prepare_task_switch), so a queued task's pending wait is added from
 * its queueing time and the clock of the run queue it is on, which the
 * scheduler brought up to date before the switch (reached through its
 * CFS queue: a per-CPU kernel variable cannot be named from here). 0
 * where the kernel keeps no sched_info; the pending part is left out
 * where a CFS queue does not name its run queue. */
static __always_inline __u64 run_delay(struct task_struct *task_arg)
{
	/* Plain loads through a view of the switch's task (faulting loads,
	 * no helper calls): read with a probe read each, these five loads
	 * were a good part of every tracked switch's program. */
	struct task_struct *task = BTF_VIEW(task_arg, struct task_struct);
	if (!bpf_core_field_exists(task->sched_info))
		return 0;
	__u64 rd = task->sched_info.run_delay;
	__u64 queued = task->sched_info.last_queued;
	struct rq *rq = queued ? task_rq_view(task) : NULL;
	if (rq && rq->clock > queued)
		rd += rq->clock - queued;
	return rd;
}

/* The time of a switch, from the scheduler's run-queue clock: reading
 * the monotonic clock (bpf_ktime_get_ns) costs 25 ns on this VM (an
 * indirect call through a retpoline to the TSC read), a third of a
 * tracked switch's program, where the run queue's clock is a load. The
 * scheduler brought it up to date for this switch (update_rq_clock in
 * __schedule), except where it skips that update after a wakeup asked
 * for the switch: then it is the clock of that wakeup, mostly
 * microseconds before, up to 0.3 ms where the preempted thread ran on
 * in the kernel (measured: 1.5% of a busy run's switches over 10 us);
 * the kernel's own sum_exec_runtime and run_delay are kept by it. Both
 * ends of a switch take the same time, so the error moves time between
 * a thread's run and its next wait, never loses it (on_switch keeps
 * each thread's time from running backwards).
 *
 * The other programs and user space use the monotonic clock, so the run
 * queue's is put on it by an offset per CPU, measured with one monotonic
 * read every CLOCK_CAL_NS of run-queue time. A stale run-queue clock only
 * makes a measured offset larger, so a smaller one is taken at once and
 * a larger one rises at most CLOCK_LEAK_NS a measurement (500 ppm, the
 * most the kernel slews the monotonic clock): a stale measurement puts
 * the switches after it at most that much ahead (measured beside a busy
 * loop: 5 switches in 842,000 over 10 us ahead, none over 20, against
 * 0.4% over 10 us where the offset followed every measurement).
 *
 * task is a thread of the switch, running on this CPU or about to; where
 * its run queue is not this CPU's (not a fair-class thread's), the
 * monotonic clock is read. */
#define CLOCK_CAL_NS (4 * 1000 * 1000)
#define CLOCK_LEAK_NS 2000

struct clock_cal {
	__u64 rq_at; /* the run queue's clock at the last measurement (0: none) */
	__s64 off;   /* monotonic minus run-queue clock */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct clock_cal);
} clock_cals SEC(".maps");

static __always_inline __u64 not_before(__u64 t, __u64 floor)
{
	return t < floor ? floor : t;
}

static __always_inline __u64 switch_now(struct task_struct *task_arg)
{
	struct task_struct *task = BTF_VIEW(task_arg, struct task_struct);
	__u32 zero = 0;
	struct clock_cal *c = bpf_map_lookup_elem(&clock_cals, &zero);
	struct rq *rq = task_rq_view(task);
	if (!c || !rq || !bpf_core_field_exists(rq->cpu) || rq->cpu != bpf_get_smp_processor_id())
		return bpf_ktime_get_ns();
	__u64 rc = rq->clock;
	if (c->rq_at && rc >= c->rq_at && rc - c->rq_at < CLOCK_CAL_NS)
		return rc + c->off;
	__u64 now = bpf_ktime_get_ns();
	__s64 off = (__s64)(now - rc);
	if (!c->rq_at || off < c->off + CLOCK_LEAK_NS)
		c->off = off;
	else
		c->off += CLOCK_LEAK_NS;
	c->rq_at = rc;
	return now;
}

/* The wait of d ns that ends when t (of task) is switched in, by the kind
 * its switch out recorded. */
static __always_inline void charge_wait(struct thread *t, struct task_struct *task, __u64 d)
{
	if ((t->flags & TF_OUT_URING) && charge_uring_wait(t, task, d)) {
		/* charged */
	} else if (t->flags & TF_OUT_IOWAIT) {
		t->iowait_ns += d;
		if (t->wait_file.ino) {
			struct file_stats *fs = bpf_map_lookup_elem(&files, &t->wait_file);
			if (fs) {
				__sync_fetch_and_add(&fs->iowait_ns, d);
				if (t->flags & TF_OUT_DIRECT)
					__sync_fetch_and_add(&fs->direct_wait_ns, d);
			}
			if (t->wait_stack)
				file_stack_add(key_dev_gen(&t->wait_file), t->wait_file.ino, t->wait_stack, FS_IOWAIT, d);
		}
	} else if (t->flags & TF_OUT_RUNNABLE) {
		t->runq_ns += d;
	} else {
		t->other_ns += d;
	}
	if (t->flags & TF_OUT_FILL) {
		t->fill_wait_ns += d;
		if (t->flags & TF_OUT_RUNNABLE)
			t->fill_runq_ns += d;
		if (t->wait_file.ino) {
			struct file_stats *fs = bpf_map_lookup_elem(&files, &t->wait_file);
			if (fs)
				__sync_fetch_and_add(&fs->fill_wait_ns, d);
			if (t->wait_stack)
				file_stack_add(key_dev_gen(&t->wait_file), t->wait_file.ino, t->wait_stack, FS_FILL_WAIT, d);
		}
	}
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	/* The clock is read only for a tracked thread: on a VM it costs
	 * more than the rest of an untracked switch's program (switch_now). */
	__u64 now = 0;
	struct tstate *s = task_state(prev);
	struct thread *t = s ? slot_thread(s) : NULL;
	if (s && t) {
		/* Not before what this thread's programs stamped since it was
		 * switched in (the monotonic clock, read after the run queue's
		 * clock may have stopped for this switch): charged up to such a
		 * stamp, a fill's CPU would exceed its thread's. */
		now = switch_now(prev);
		now = not_before(now, t->last_ts);
		now = not_before(now, s->mark_ts);
		now = not_before(now, s->seen_ts);
		if (s->flags & TF_LAZY_END) /* the call only where it has work */
			end_left_entry(s, t, prev, now);
		/* Still inside the fill's entry: switching out sets the
		 * thread's rseq notification, so the entry's return to user
		 * space runs rseq_update, which ends the fill there
		 * (bpf/pagecache: on_rseq_return). */
		if ((s->flags & (TF_LAZY_END | TF_RSEQ_THREAD)) == (TF_LAZY_END | TF_RSEQ_THREAD))
			s->flags |= TF_RSEQ_END;
		/* The scheduler has brought the clock up to date before the
		 * switch (update_curr). */
		__u64 exec = prev->se.sum_exec_runtime;
		if ((t->flags & TF_ON_CPU) && now > t->last_ts) {
			t->cpu_ns += now - t->last_ts;
		} else if (!(t->flags & TF_ON_CPU) && t->last_ts && now > t->last_ts) {
			/* Switched out, yet its switch in was not seen: under
			 * load this kernel sometimes runs a thread without a
			 * sched_switch to it reaching the program (measured: a
			 * few per thousand switches beside busy loops; not a
			 * recursion miss). The interval since the switch out was
			 * a wait, then a run: the kernel's on-CPU clock of the
			 * thread tells how long the run was. (It is also how a
			 * thread seeded from user space, its state unknown,
			 * comes to its first switch out.) */
			__u64 d = now - t->last_ts;
			__u64 run = exec > t->exec_ns ? exec - t->exec_ns : 0;
			if (run > d)
				run = d;
			t->cpu_ns += run;
			if (d > run)
				charge_wait(t, prev, d - run);
			if (t->flags & (TF_OUT_IOWAIT | TF_OUT_RUNNABLE | TF_OUT_FILL) || t->switches)
				t->unseen_ins++;
			/* The fill's CPU is the run, not the wait; the thread was
			 * on the CPU for it (the flag goes again below). */
			if (s->mark_ts < now - run)
				s->mark_ts = now - run;
			t->flags |= TF_ON_CPU;
		}
		t->exec_ns = exec;
		bool iowait = BPF_CORE_READ_BITFIELD(prev, in_iowait);
		/* io_uring_enter waiting for completions is marked an I/O
		 * wait, yet the I/O is done elsewhere: by io-wq workers (their
		 * own waits and fills name the file) or by the block layer
		 * for requests the entry did not fill or queue. Unless the
		 * entry itself fills or reads direct, it is a plain wait. */
		bool uring = iowait && !(s->flags & (TF_MISSED | TF_DIRECT)) && current_syscall(prev) == NR_io_uring_enter;
		if (uring)
			iowait = false;
		/* A fill interval stops while the thread is off the CPU; its
		 * waits, other than for I/O, still belong to the fill: a warm
		 * read would not have waited. */
		bool filling = s->flags & TF_MISSED;
		if (filling)
			charge_miss(s, t, now);
		__u32 f = t->flags & ~(TF_ON_CPU | TF_OUT_IOWAIT | TF_OUT_RUNNABLE | TF_OUT_FILL | TF_OUT_DIRECT | TF_OUT_URING);
		if (uring)
			f |= TF_OUT_URING;
		if (filling && !iowait) {
			f |= TF_OUT_FILL;
			t->wait_file = s->cur; /* user space adds ongoing fill waits to it */
			t->wait_stack = s->fill_stack;
		}
		if (iowait) {
			f |= TF_OUT_IOWAIT;
			f |= wait_cause(s, t, prev, now);
		} else if (preempt || prev_state == 0) {
			f |= TF_OUT_RUNNABLE;
		}
		/* rdelay_ns is left as the switch in set it: only a switch in
		 * that finds the thread still on a CPU reads it, and that is
		 * after a switch out no program saw. */
		t->last_ts = now;
		t->switches++;
		/* Written last: once user space sees TF_DEAD it reads the final
		 * counters and recycles the slot. */
		asm volatile("" ::: "memory");
		if (prev_state & TASK_DEAD_)
			f |= TF_DEAD;
		t->flags = f;
	}

	s = task_state(next);
	t = s ? slot_thread(s) : NULL;
	if (s && t) {
		if (!now)
			now = switch_now(next);
		/* Nor before its switch out, or its fork: its time would run
		 * backwards. */
		now = not_before(now, t->last_ts);
		__u64 exec = next->se.sum_exec_runtime;
		__u64 rd = run_delay(next);
		if (!(t->flags & TF_ON_CPU) && t->last_ts && now > t->last_ts) {
			charge_wait(t, next, now - t->last_ts);
		} else if ((t->flags & TF_ON_CPU) && t->last_ts && now > t->last_ts) {
			/* Switched in while still flagged on a CPU: its switch
			 * out was not seen (the untraced switches that leave
			 * switch-ins unseen leave switch-outs unseen as well;
			 * measured: about as many). The interval since the last
			 * switch in was a run, then a wait of unknown kind: the
			 * kernel's run-queue clock tells its run-queue part (a
			 * spinner preempted beside a busy loop), the rest was a
			 * sleep. Before this repair the whole interval was lost:
			 * 0.1-0.9 s of a thread that slept on a paced download. */
			__u64 d = now - t->last_ts;
			__u64 run = exec > t->exec_ns ? exec - t->exec_ns : 0;
			if (run > d)
				run = d;
			__u64 queued = rd > t->rdelay_ns ? rd - t->rdelay_ns : 0;
			if (queued > d - run)
				queued = d - run;
			t->cpu_ns += run;
			t->runq_ns += queued;
			t->other_ns += d - run - queued;
			t->unseen_outs++;
		}
		t->exec_ns = exec;
		t->rdelay_ns = rd;
		t->flags = (t->flags & ~(TF_OUT_IOWAIT | TF_OUT_RUNNABLE | TF_OUT_FILL | TF_OUT_DIRECT | TF_OUT_URING)) | TF_ON_CPU;
		t->last_ts = now;
		s->mark_ts = now;
		if (s->flags & TF_MISSED)
			t->fill_mark = now;
	}
	return 0;
}

static __always_inline void fill_comm(char *dst, struct task_struct *task)
{
	bpf_probe_read_kernel_str(dst, 16, BPF_CORE_READ(task, comm));
}

/* Track child, created by a thread whose state is ps: a slot for its
 * counters, its task storage, and a fork event when it starts a process
 * (or is the leader of one). */
static __always_inline void track(struct tstate *ps, struct task_struct *child, __u32 ptgid)
{
	__u32 inherited = ps->flags & TF_PYTHON;
	__u64 now = bpf_ktime_get_ns();
	__u32 ctid = BPF_CORE_READ(child, pid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u32 slot;
	if (bpf_map_pop_elem(&free_slots, &slot)) {
		__u32 zero = 0;
		__u32 *n = bpf_map_lookup_elem(&next_slot, &zero);
		if (!n)
			return;
		slot = 1 + *n * ncpus + bpf_get_smp_processor_id();
		*n += 1;
	}
	struct thread *t = bpf_map_lookup_elem(&threads, &slot);
	if (!t) {
		count_lost(LOST_THREADS);
		return;
	}
	struct thread nt = {};
	nt.tid = ctid;
	nt.tgid = ctgid;
	nt.flags = TF_OUT_RUNNABLE; /* created runnable, waiting for a CPU */
	nt.last_ts = now;
	*t = nt;
	struct tstate ns = {};
	ns.slot = slot;
	ns.tgid = ctgid;
	ns.flags = inherited;
	mark_tracked(ctgid);
	if (!bpf_task_storage_get(&task_states, child, &ns, BPF_LOCAL_STORAGE_GET_F_CREATE)) {
		t->tid = 0;
		bpf_map_push_elem(&free_slots, &slot, 0);
		count_lost(LOST_THREADS);
		return;
	}
	if (ctgid != ptgid || ctid == ctgid) {
		struct task_event *ev = bpf_ringbuf_reserve(&events, TASK_EVENT_HEAD, 0);
		if (!ev) {
			count_lost(LOST_RINGBUF);
			return;
		}
		ev->kind = EV_FORK;
		ev->pid = ctgid;
		ev->tid = ctid;
		ev->ppid = ptgid;
		ev->ts = now;
		ev->exit_code = 0;
		ev->reason = 0;
		fill_comm(ev->comm, child);
		ev->filename[0] = 0;
		ev->args_len = 0;
		bpf_ringbuf_submit(ev, ring_wakeup(&events));
	}
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	struct tstate *ps = task_state(parent);
	if (ps)
		track(ps, child, BPF_CORE_READ(parent, tgid));
	return 0;
}

/* io_uring's workers (io-wq, PF_IO_WORKER) are threads of the process
 * whose ring they serve, made by create_io_thread, which does not reach
 * sched_process_fork: a read a worker does for the process (IOSQE_ASYNC,
 * or one that would block) would go unseen. task_newtask fires for them,
 * in the thread that creates them (the submitter, or another worker); the
 * process's leader stands in when that thread is not tracked. */
#define PF_IO_WORKER_ 0x00000010

SEC("tp_btf/task_newtask")
int BPF_PROG(on_newtask, struct task_struct *task, __u64 clone_flags)
{
	if (!(task->flags & PF_IO_WORKER_))
		return 0;
	struct tstate *ps = current_state();
	if (!ps)
		ps = leader_state(task->tgid);
	if (ps && !task_state(task))
		track(ps, task, task->tgid);
	return 0;
}

/* Whether the image an exec runs is a Python interpreter: the base name of
 * its interpreter (the program itself, or the #! line's) starts with
 * "python". What the page cache's Python reads are sent for. The scan for
 * the last '/' runs in bpf_loop: unrolled, the verifier walked every
 * position the base could take. */
struct base_scan {
	char buf[128];
	__u32 n;
	__u32 base;
};

static long base_step(__u64 i, struct base_scan *c)
{
	if (i >= c->n)
		return 1;
	if (c->buf[i & 127] == '/')
		c->base = i + 1;
	return 0;
}

static __always_inline bool python_image(struct linux_binprm *bprm)
{
	struct base_scan c = {};
	long n = bpf_probe_read_kernel_str(c.buf, sizeof(c.buf), BPF_CORE_READ(bprm, interp));
	if (n <= 0)
		return false;
	c.n = n;
	bpf_loop(sizeof(c.buf), base_step, &c, 0);
	__u32 b = c.base;
	if (b > sizeof(c.buf) - 7)
		return false;
	return c.buf[b] == 'p' && c.buf[b + 1] == 'y' && c.buf[b + 2] == 't' && c.buf[b + 3] == 'h' &&
	       c.buf[b + 4] == 'o' && c.buf[b + 5] == 'n';
}

/* Why p's exec was a secure one, from the credentials it committed
 * (they are the task's by the time the tracepoint fires). */
static __always_inline __u32 secure_reason(struct task_struct *p)
{
	if (BPF_CORE_READ(p, cred, euid.val) != BPF_CORE_READ(p, cred, uid.val))
		return SX_SETUID;
	if (BPF_CORE_READ(p, cred, egid.val) != BPF_CORE_READ(p, cred, gid.val))
		return SX_SETGID;
	return SX_CAPS;
}

/* p, whose exec was a secure one, leaves the tracked set: its thread's
 * counters are closed as at its last switch out (TF_DEAD: user space
 * reads them and recycles the slot) and its task storage is deleted, so
 * every sensor's next lookup finds it untracked, and so does every fork
 * of it. De_thread has already ended the process's other threads. */
static __always_inline void untrack(struct task_struct *p, struct tstate *s, struct linux_binprm *bprm)
{
	__u64 now = bpf_ktime_get_ns();
	struct thread *t = slot_thread(s);
	if (t) {
		end_left_entry(s, t, p, 0);
		if (s->flags & TF_MISSED)
			charge_miss(s, t, now);
		if ((t->flags & TF_ON_CPU) && now > t->last_ts)
			t->cpu_ns += now - t->last_ts;
		t->last_ts = now;
		t->fill_mark = 0;
		asm volatile("" ::: "memory");
		t->flags = (t->flags & ~(TF_ON_CPU | TF_OUT_IOWAIT | TF_OUT_RUNNABLE | TF_OUT_FILL | TF_OUT_DIRECT | TF_OUT_URING)) | TF_EXITED | TF_DEAD;
	}
	bpf_task_storage_delete(&task_states, p);
	struct task_event *ev = bpf_ringbuf_reserve(&events, TASK_EVENT_HEAD, 0);
	if (!ev) {
		count_lost(LOST_RINGBUF);
		return;
	}
	ev->kind = EV_UNTRACK;
	ev->pid = BPF_CORE_READ(p, tgid);
	ev->tid = BPF_CORE_READ(p, pid);
	ev->ppid = BPF_CORE_READ(p, real_parent, tgid);
	ev->ts = now;
	ev->exit_code = 0;
	ev->reason = secure_reason(p);
	fill_comm(ev->comm, p);
	bpf_probe_read_kernel_str(ev->filename, FILENAME_LEN, BPF_CORE_READ(bprm, filename));
	ev->args_len = 0;
	ev->args_total = 0;
	bpf_ringbuf_submit(ev, BPF_RB_FORCE_WAKEUP);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	/* Task storage follows the task_struct, so a non-leader thread that
	 * execs (and takes over the leader's pid) keeps its state and slot. */
	struct tstate *s = task_state(p);
	if (!s)
		return 0;
	if (!trace_secure_exec && BPF_CORE_READ_BITFIELD(bprm, secureexec)) {
		untrack(p, s, bprm);
		return 0;
	}
	if (python_image(bprm))
		s->flags |= TF_PYTHON;
	else
		s->flags &= ~TF_PYTHON;
	__u32 tid = BPF_CORE_READ(p, pid);
	/* Built in a per-CPU scratch and sent at the size argv needs: a
	 * burst of execs would fill the ring with unused argv buffers. */
	__u32 zero = 0;
	struct task_event *ev = bpf_map_lookup_elem(&exec_scratch, &zero);
	if (!ev)
		return 0;
	ev->kind = EV_EXEC;
	ev->pid = BPF_CORE_READ(p, tgid);
	ev->tid = tid;
	ev->ppid = BPF_CORE_READ(p, real_parent, tgid);
	ev->ts = bpf_ktime_get_ns();
	ev->exit_code = 0;
	ev->reason = 0;
	fill_comm(ev->comm, p);
	bpf_probe_read_kernel_str(ev->filename, FILENAME_LEN, BPF_CORE_READ(bprm, filename));
	/* argv now, from the new image's memory: a short-lived process is gone
	 * before user space could read /proc/PID/cmdline. */
	unsigned long start = BPF_CORE_READ(p, mm, arg_start), end = BPF_CORE_READ(p, mm, arg_end);
	__u64 len = end > start ? end - start : 0;
	ev->args_total = len > 0xffffffff ? 0xffffffff : len;
	if (len > ARGS_LEN)
		len = ARGS_LEN;
	ev->args_len = 0;
	if (len && bpf_probe_read_user(ev->args, len, (void *)start) == 0)
		ev->args_len = len;
	__u64 size = TASK_EVENT_HEAD + ev->args_len;
	if (size > sizeof(*ev))
		size = sizeof(*ev);
	if (bpf_ringbuf_output(&events, ev, size, ring_wakeup(&events)))
		count_lost(LOST_RINGBUF);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p, bool group_dead)
{
	struct tstate *s = task_state(p);
	struct thread *t = s ? slot_thread(s) : NULL;
	if (!t)
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	t->flags |= TF_EXITED;
	if (!group_dead)
		return 0;
	struct task_event *ev = bpf_ringbuf_reserve(&events, TASK_EVENT_HEAD, 0);
	if (!ev) {
		count_lost(LOST_RINGBUF);
		return 0;
	}
	ev->kind = EV_EXIT;
	ev->pid = BPF_CORE_READ(p, tgid);
	ev->tid = tid;
	ev->ppid = BPF_CORE_READ(p, real_parent, tgid);
	ev->ts = bpf_ktime_get_ns();
	ev->exit_code = BPF_CORE_READ(p, exit_code);
	ev->reason = 0;
	fill_comm(ev->comm, p);
	ev->filename[0] = 0;
	ev->args_len = 0;
	bpf_ringbuf_submit(ev, ring_wakeup(&events));
	return 0;
}
