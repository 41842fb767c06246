#pragma once

#include "common.h"
#include "syscall64.h"

/* A file's charges for one Python stack (file_stacks, and a file's
 * first stack in its own entry). */
struct file_stack_stats {
	__u64 miss_cpu_ns;
	__u64 iowait_ns;
	__u64 fill_wait_ns;
	__u64 missed; /* pages inserted while the stack's fill was open (readahead's included) */
	__u64 read;   /* pages its kernel entries read or mapped while their fill was open */
};

/* The per-file counters, written by the page-cache object (accesses,
 * misses, fill CPU) and the scheduler object (I/O wait at the switch in,
 * fill CPU stopped at the switch out). The scheduler object creates the
 * map; the page-cache object takes it as a map replacement. */
struct file_stats {
	__u64 accessed;
	__u64 missed;
	__u64 evicted;
	__u64 iowait_ns;
	__u64 miss_cpu_ns;
	__u64 created; /* pages inserted by writes: new data, not read from disk */
	__u32 last_tgid;
	__u32 path_sent;
	/* Pages the run inserted again after they were evicted during the
	 * run: read from disk more than once (bpf/pagecache, run_pages). */
	__u64 reread;
	/* Pages tracked threads read while an untraced process was inserting
	 * the file: they came from disk through that process. */
	__u64 shared;
	/* Pages untraced processes read from disk into the cache during the
	 * run (bpf/evict), and when they last did. */
	__u64 others_inserted;
	__u64 other_ins_ts;
	/* Off-CPU time, not I/O wait, of tracked threads inside kernel
	 * entries that filled this file (bpf/sched). */
	__u64 fill_wait_ns;
	/* Direct I/O, which bypasses the page cache: bytes read by tracked
	 * threads (bpf/pagecache, at block_bio_queue), and their I/O wait
	 * while those reads were in flight (part of iowait_ns; bpf/sched). */
	__u64 direct_bytes;
	__u64 direct_wait_ns;
	/* The process whose first read of this Python file was sent with
	 * the file's first sight (bpf/pagecache: add_to_cache), so its reads
	 * send no other record. */
	__u32 py_read_tgid;
	/* A tracked process of another mount namespace touched the file,
	 * and the path it used was sent (bpf/pagecache: emit_view). */
	__u32 view_sent;
	/* The file's first miss, kept here rather than in bpf/pagecache's
	 * read_orders, which it enters at its second: most of a program's
	 * files miss once (a module's bytecode), and each table a new file
	 * enters costs its insertion a hash insert (a cold bucket and a new
	 * element). order_next is the page after it (0: none yet); its
	 * pages, and whether a fault brought them. */
	__u64 order_next;
	__u32 order_pages;
	__u32 order_fault;
	/* The run's inserted and evicted marks of the file's first
	 * RUN_PAGES_BLOCK pages: run_pages' block 0 of it, kept here for the
	 * same reason. */
	__u64 blk0_inserted;
	__u64 blk0_evicted;
	/* The first Python stack charged for the file, and its charges,
	 * kept here for the same reason: most files are filled from one
	 * call site (a module's bytecode from its import), and a charge
	 * that finds its stack here costs no file_stacks insert (1.1 µs of
	 * a cold module's insertion). file_stacks holds the others. */
	__u64 first_stack;
	struct file_stack_stats first_charges;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FILES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct file_key);
	__type(value, struct file_stats);
} files SEC(".maps");

/* The same charges per (file, Python stack): where the thread that
 * filled (bpf/pagecache: open_fill) stood in its Python code. Only fills
 * that took a stack have entries; the rest of a file's time is "no
 * stack". A file's first stack is charged in its own entry
 * (first_stack); this table holds the stacks after it. Bounded: a charge that finds the table full is counted
 * (LOST_STACKS) and stays in the file's own counters only. */
#define MAX_FILE_STACKS 16384

struct file_stack_key {
	struct file_key file;
	__u64 stack;
};

/* Fields of file_stack_stats, for file_stack_add. */
enum file_stack_field {
	FS_MISS_CPU = 0,
	FS_IOWAIT = 1,
	FS_FILL_WAIT = 2,
	FS_MISSED = 3,
	FS_READ = 4,
	FS_FIELDS = 5,
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FILE_STACKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct file_stack_key);
	__type(value, struct file_stack_stats);
} file_stacks SEC(".maps");

/* Adds d to field of the (file, stack) entry, created when missing.
 * Global, with scalar arguments: the verifier checks it once per object
 * instead of at each of its callers (which made the page-cache object's
 * load some 20 ms longer). */
__noinline int file_stack_add(__u64 dev_gen, __u64 ino, __u64 stack, __u32 field, __u64 d)
{
	if (!stack || !ino || !d || field >= FS_FIELDS)
		return 0;
	struct file_stack_key k = {.file = {.dev = (__u32)dev_gen, .gen = dev_gen >> 32, .ino = ino}, .stack = stack};
	struct file_stack_stats *st = NULL;
	struct file_stats *fs = bpf_map_lookup_elem(&files, &k.file);
	if (fs) {
		/* The first stack to come claims the file's own slot. */
		__u64 first = fs->first_stack;
		if (!first) {
			first = __sync_val_compare_and_swap(&fs->first_stack, 0, stack);
			if (!first)
				first = stack;
		}
		if (first == stack)
			st = &fs->first_charges;
	}
	if (!st)
		st = bpf_map_lookup_elem(&file_stacks, &k);
	if (!st) {
		struct file_stack_stats zero = {};
		bpf_map_update_elem(&file_stacks, &k, &zero, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&file_stacks, &k);
		if (!st) {
			count_lost(LOST_STACKS);
			return 0;
		}
	}
	switch (field) {
	case FS_MISS_CPU:
		__sync_fetch_and_add(&st->miss_cpu_ns, d);
		break;
	case FS_IOWAIT:
		__sync_fetch_and_add(&st->iowait_ns, d);
		break;
	case FS_FILL_WAIT:
		__sync_fetch_and_add(&st->fill_wait_ns, d);
		break;
	case FS_MISSED:
		__sync_fetch_and_add(&st->missed, d);
		break;
	default:
		__sync_fetch_and_add(&st->read, d);
	}
	return 0;
}

/* Which pages of the run's files the run inserted (read from disk) and
 * which of those were evicted since, 64 pages a block: an insertion of
 * an evicted page is a re-read. The page-cache object sets inserted bits
 * and counts re-reads; the eviction object sets evicted bits. A file's
 * block 0 is in its file_stats entry (blk0_*), not here. */
#define RUN_PAGES_BLOCK 64
#define MAX_RUN_BLOCKS (1 << 17) /* 32 GiB of 4 KiB pages */

struct run_block_key {
	__u32 dev;
	__u32 gen; /* as file_key's */
	__u64 ino;
	__u64 block; /* page index / RUN_PAGES_BLOCK */
};

struct run_block {
	__u64 inserted;
	__u64 evicted;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_RUN_BLOCKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct run_block_key);
	__type(value, struct run_block);
} run_pages SEC(".maps");

/* The mask of pages [lo, hi] inside block b (lo, hi page indices). */
static __always_inline __u64 block_mask(__u64 b, __u64 lo, __u64 hi)
{
	__u64 first = b * RUN_PAGES_BLOCK, last = first + RUN_PAGES_BLOCK - 1;
	__u64 from = lo > first ? lo - first : 0;
	__u64 to = hi < last ? hi - first : RUN_PAGES_BLOCK - 1;
	__u64 width = to - from + 1;
	__u64 m = width >= 64 ? ~0ull : ((1ull << width) - 1);
	return m << (from & 63);
}

/* Folios of up to 2^10 pages span at most 17 blocks. */
#define MAX_FOLIO_BLOCKS 17

/* A bpf_loop over the run_pages blocks of pages [lo, hi] of bk's file
 * (unrolled, the 17 blocks multiplied the verifier's states of the
 * programs that mark pages); again is what the marking step counts. */
struct block_walk {
	struct run_block_key bk;
	__u64 lo, hi, again;
};

/* Step i of such a loop: < 0 once past hi (the loop stops), 0 for block
 * 0 (the file's entry holds its marks), > 0 for a block to visit, its
 * key in c->bk and its pages of [lo, hi] in *mask. */
static __always_inline long walk_block(__u64 i, struct block_walk *c, __u64 *mask)
{
	__u64 b = c->lo / RUN_PAGES_BLOCK + i;
	if (b * RUN_PAGES_BLOCK > c->hi)
		return -1;
	if (b == 0)
		return 0;
	c->bk.block = b;
	*mask = block_mask(b, c->lo, c->hi);
	return 1;
}

/* A walk's start: key's file, its pages [lo, hi]. */
static __always_inline void start_walk(struct block_walk *c, const struct file_key *key, __u64 lo, __u64 hi)
{
	c->bk.dev = key->dev;
	c->bk.gen = key->gen;
	c->bk.ino = key->ino;
	c->lo = lo;
	c->hi = hi;
}

/* Charge the on-CPU time since the mark to page-cache filling: to the
 * thread and to the file of its latest page-cache event. th is s's slot
 * when the caller has it, else NULL. */
static __always_inline void charge_miss(struct tstate *s, struct thread *th, __u64 now)
{
	if (now <= s->mark_ts)
		return;
	__u64 d = now - s->mark_ts;
	s->mark_ts = now;
	if (!th)
		th = slot_thread(s);
	/* Running, yet off the CPU since its last switch out as far as the
	 * scheduler's program saw: its switch in did not reach the program
	 * (bpf/sched counts such). The time since the mark holds a wait of
	 * unknown length, which is no fill CPU: none is charged, rather
	 * than a fill's CPU over its thread's (the scheduler's program gives
	 * that thread the kernel's on-CPU clock for the run). */
	if (th && !(th->flags & TF_ON_CPU) && th->switches && th->last_ts >= now - d)
		return;
	if (th) {
		th->miss_cpu_ns += d;
		th->fill_mark = now;
	}
	if (s->cur.ino) {
		struct file_stats *fs = bpf_map_lookup_elem(&files, &s->cur);
		if (fs)
			__sync_fetch_and_add(&fs->miss_cpu_ns, d);
		if (s->fill_stack)
			file_stack_add(key_dev_gen(&s->cur), s->cur.ino, s->fill_stack, FS_MISS_CPU, d);
	}
}

/* The syscall task is in, or -1 in a fault: the entry code keeps
 * -ENOSYS in regs->ax until the syscall returns, and its number in
 * orig_ax; a fault's frame holds the interrupted user ax instead. */
static __always_inline long current_syscall(struct task_struct *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || (long)regs->ax != -ENOSYS_)
		return -1;
	return regs->orig_ax;
}

/* Which kernel entry task is in, as far as its counters tell: the
 * syscall (or -1 in a fault) and the task's read and write syscalls and
 * faults so far. vfs_read and vfs_write count a syscall when it is done,
 * and a fault is counted when it is handled, so the entry that opened a
 * fill has ended once the value changes. Consecutive entries the
 * counters do not tell apart (the same syscall again, neither a read nor
 * a write, no fault between them) read as one. */
static __always_inline __u64 entry_of(struct task_struct *task)
{
	__u64 n = task->min_flt + task->maj_flt;
	if (bpf_core_field_exists(task->ioac))
		n += task->ioac.syscr + task->ioac.syscw;
	return ((__u64)(current_syscall(task) + 1) << 48) ^ n;
}

/* The syscall an entry_of value was taken in (-1: a fault): its top
 * bits, which the counts never reach. */
static __always_inline long entry_syscall(__u64 entry)
{
	return (long)(entry >> 48) - 1;
}

/* End the current entry's fill (its CPU charged up to end) and direct
 * read, however they were to end. th is s's slot when the caller has it,
 * else NULL. */
static __always_inline void end_fill(struct tstate *s, struct thread *th, __u64 end)
{
	if (!th)
		th = slot_thread(s);
	if (s->flags & TF_MISSED)
		charge_miss(s, th, end);
	s->flags &= ~(TF_MISSED | TF_END_PENDING | TF_LAZY_END | TF_RETURNING | TF_FAULT_TS | TF_DIRECT | TF_RSEQ_THREAD | TF_RSEQ_END |
		      TF_SMALL_READ);
	s->fill_stack = 0;
	if (th)
		th->fill_mark = 0;
}

/* A switch out this soon after a filling syscall's exit is the one on its
 * way back to user space (the scheduler preempts there more than
 * anywhere: a task work, which runs after it, counted it in the fill). */
#define RETURN_SWITCH_NS (100 * 1000)

/* Whether the read syscall of s's fill has returned: the task's count of
 * completed reads moved (io_uring_enter counts none: taken as returned). */
static __always_inline bool read_returned(struct tstate *s, struct task_struct *task)
{
	if (!bpf_core_field_exists(task->ioac) || entry_syscall(s->entry) == NR_io_uring_enter)
		return true;
	return task->ioac.syscr != s->fill_reads;
}

/* Without task works (TF_LAZY_END), the fill or direct read of an entry
 * the thread has left ends at this look: its CPU time is charged up to
 * the last time the thread was seen in the entry, and the rest, up to
 * its unseen return to user space, is not. After a read-family exit
 * ended the syscall (TF_RETURNING), only a switch out (switch_ts, else
 * 0) right after it, with nothing counted since, is still the entry's.
 * th is s's slot when the caller has it, else NULL. Not inlined: its
 * frame is its own, not added to the callers' (on_get_pages's chain down
 * to py_walk is at the limit). */
static __attribute__((noinline, unused)) void end_left_entry(struct tstate *s, struct thread *th, struct task_struct *task,
								  __u64 switch_ts)
{
	if (!(s->flags & TF_LAZY_END))
		return;
	bool same = s->entry == entry_of(task);
	if (s->flags & TF_RETURNING)
		same = same && switch_ts && switch_ts - s->seen_ts < RETURN_SWITCH_NS;
	if (same)
		return;
	/* A thread with an rseq area that never switched out inside the
	 * fill returned unseen, and no read exit saw it: the syscall's exit
	 * is asked for, for its next fills (bpf/pagecache: ask_unseen). */
	bool unseen = (s->flags & (TF_RSEQ_THREAD | TF_RSEQ_END | TF_RETURNING | TF_SMALL_READ)) == TF_RSEQ_THREAD &&
		      read_returned(s, task);
	end_fill(s, th, s->seen_ts);
	if (unseen)
		s->flags |= TF_ASK_EXIT;
}

/* Syscalls that write file data: pages they insert into the page cache
 * are new, not read from disk. */
static __always_inline bool writes_files(long id)
{
	switch (id) {
	case NR_write:
	case NR_pwrite64:
	case NR_writev:
	case NR_truncate:
	case NR_ftruncate:
	case NR_fallocate:
	case NR_pwritev:
	case NR_pwritev2:
		return true;
	}
	return false;
}

/* The file task has open as descriptor fd, or NULL. A few probe reads. */
static __always_inline struct file *task_fd_file(struct task_struct *task, unsigned int fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return NULL;
	return f;
}

/* The input descriptor of read-family syscall nr given its first two
 * arguments: sendfile's second, the first of read, pread64, readv,
 * preadv, preadv2, splice and copy_file_range; -1 for another syscall. */
static __always_inline long read_input_fd(long nr, __u64 arg0, __u64 arg1)
{
	switch (nr) {
	case NR_read:
	case NR_pread64:
	case NR_readv:
	case NR_preadv:
	case NR_preadv2:
	case NR_splice:
	case NR_copy_file_range:
		return (__u32)arg0;
	case NR_sendfile:
		return (__u32)arg1;
	}
	return -1;
}

/* The file the current read-family syscall of task reads (read, pread64,
 * readv, preadv, preadv2: the descriptor in the first argument), or NULL.
 * A few probe reads: for rare events only (a switch out for I/O, a bio). */
static __always_inline struct file *syscall_read_file(struct task_struct *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	long nr = current_syscall(task);
	if (!regs || (nr != NR_read && nr != NR_pread64 && nr != NR_readv && nr != NR_preadv && nr != NR_preadv2))
		return NULL;
	return task_fd_file(task, BPF_CORE_READ(regs, di));
}
