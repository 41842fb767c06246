//go:build ignore

/* coldtrace's page-cache sensor: pages accessed, missed (inserted by a
 * tracked thread), created and read again per file, and the CPU time the
 * kernel entries that filled the cache spent doing it (fill intervals).
 * Counters are aggregated in the files map, which user space polls; only
 * the first sight of a file (its path) goes through the ring buffer.
 *
 * The per-thread maps and the files map are the scheduler object's
 * (bpf/sched), given at load time as map replacements: its sched_switch
 * program stops fill intervals while a thread is off the CPU and charges
 * I/O waits to files. Tracepoints only: kprobes and fentry are not
 * available on the kernels this was built for. */

#include "common.h"
#include "files.h"
#include "syscall64.h"
#include "order.h"
#include "pywalk.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";


/* A fault's insertions follow its filemap_fault within microseconds. */
#define FAULT_TS_MAX_NS (1000 * 1000)

/* The kernel's own bounds on a name (NAME_MAX) and a path (PATH_MAX, its
 * NUL included): every component is copied whole, and the path whole up
 * to PATH_MAX bytes at any depth; a longer one is cut, and says so. */
#define NAME_MAX_ 255
#define PATH_MAX_ 4096

/* A file's path inside its filesystem, as names leaf first, each ending
 * in NUL, packed into names[0..len); user space joins them in reverse and
 * prefixes the mount point of dev. len is the length of that path with a
 * '/' for each NUL, so it is at most PATH_MAX_. Sent with its used length
 * only, so a program importing 20,000 modules does not fill the ring
 * buffer. names has room for one more name past PATH_MAX_ so that the
 * verifier sees every copy in bounds. */
struct path_event {
	__u32 tgid;
	__u32 dev;
	__u64 ino;
	__u32 depth;     /* names filled */
	/* The walk stopped before the filesystem root: the path was longer
	 * than PATH_MAX_, or a name could not be read. The name is cut. */
	__u32 truncated;
	__u32 len;       /* bytes of names used */
	__u32 kind;      /* enum path_kind */
	__u32 tid;       /* the thread that caused the record */
	__u32 mnt_ns;    /* its mount namespace (inode number): the mounts its path is resolved in */
	__u32 gen;       /* the inode's generation (file_key) */
	/* The inode's change time, seconds since the epoch (0: unknown): a
	 * file born during the run changed since, so one changed before it
	 * needs no statx(2) of its birth time in user space. */
	__u32 ctime_sec;
	__u64 ts;        /* bpf_ktime_get_ns() */
	__u64 cpu_ns;    /* the thread's on-CPU time so far (the JIT sensor's clock) */
	char names[PATH_MAX_ + NAME_MAX_ + 1];
};

/* Why a path was sent: a file's first sight by the run; the first read of
 * a Python source or bytecode file by a process (which may also be the
 * file's first sight: user space takes it as both); a file whose first page
 * the run inserted by writing it (a new file). The last two are how the
 * JIT sensor tells Python's bytecode cache (hits, compiles, entries
 * written) while no path syscall is traced: with any syscall tracepoint
 * attached, every syscall of every task on the machine takes the kernel's
 * slow path (about 0.1 µs), a tenth of a Python program that reads many
 * small files. */
enum path_kind {
	PATH_SEEN = 0,
	PATH_PY_READ = 1,
	PATH_CREATED = 2,
	/* The path a process of another mount namespace used (send_view). */
	PATH_VIEW = 3,
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} paths SEC(".maps");

/* Files smaller than this that are only read (not mapped) from the page
 * cache get no entry of their own: a hash insertion and a path walk per file cost a
 * program that imports 20,000 small modules a tenth of its time, and a
 * warm module is not what makes a start slow. Their pages are counted
 * here; a small file that misses gets its entry at the insertion. */
#define SMALL_FILE_BYTES (256 * 1024)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} small_hits SEC(".maps");

/* Scratch space to build a path event in: too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct path_event);
} path_scratch SEC(".maps");

/* A filter in front of the file table: bit h(key) is set once the key
 * has an entry, so the common small-file hit (no entry) skips the hash
 * lookup. A set bit only means "look it up". */
#define FILTER_BITS (1 << 16)

struct file_filter {
	__u64 words[FILTER_BITS / 64];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct file_filter);
} file_filter SEC(".maps");

static __always_inline __u32 filter_bit(struct file_key *key)
{
	__u64 h = (key->ino ^ ((__u64)key->dev << 24)) * 0x9E3779B97F4A7C15ull;
	return h >> 48; /* FILTER_BITS = 2^16 */
}

/* The filter word holding key's bit, and the bit's mask in *mask. */
static __always_inline __u64 *filter_word(struct file_key *key, __u64 *mask)
{
	__u32 zero = 0;
	struct file_filter *f = bpf_map_lookup_elem(&file_filter, &zero);
	if (!f)
		return NULL;
	__u32 b = filter_bit(key);
	*mask = 1ull << (b % 64);
	return &f->words[(b / 64) & (FILTER_BITS / 64 - 1)];
}

static __always_inline bool maybe_has_entry(struct file_key *key)
{
	__u64 mask;
	__u64 *w = filter_word(key, &mask);
	return !w || (*w & mask);
}

/* A new file's entry, from read-only data rather than the stack: the
 * insertion path's frames already come near the verifier's 512 bytes. */
const volatile struct file_stats file_stats_zero = {};

static __always_inline struct file_stats *file_get(struct file_key *key, bool create)
{
	struct file_stats *fs = bpf_map_lookup_elem(&files, key);
	if (fs || !create)
		return fs;
	if (bpf_map_update_elem(&files, key, (const void *)&file_stats_zero, BPF_NOEXIST) && bpf_map_lookup_elem(&files, key) == NULL) {
		count_lost(LOST_FILES);
		return NULL;
	}
	__u64 mask;
	__u64 *w = filter_word(key, &mask);
	if (w)
		__sync_fetch_and_or(w, mask);
	return bpf_map_lookup_elem(&files, key);
}

/* Fill intervals.
 *
 * A kernel entry (a syscall or a fault) that fills the page cache is
 * charged from its first fill event (an insertion, or a read of pages
 * its own readahead inserted) to its return to user space, less the time
 * it spends off the CPU. There is no hook on every syscall: a raw
 * sys_enter/sys_exit pair costs about 100 ns per syscall here whatever
 * the program does (retpolines), a tenth of a syscall-bound program's
 * time. Instead the first fill event of an entry schedules a task work,
 * which the kernel runs at the return to user space, and which closes
 * the interval; entries that only hit cost nothing. What is lost is the
 * part of a missing syscall before its first page-cache event (fd and
 * cache lookups, well under a microsecond); a fault's interval starts at
 * its filemap_fault. */
struct fill_end {
	struct bpf_task_work tw;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct fill_end);
} fill_ends SEC(".maps");

extern int bpf_task_work_schedule_resume_impl(struct task_struct *task, struct bpf_task_work *tw,
					      void *map__map, bpf_task_work_callback_t callback,
					      void *aux__prog) __ksym __weak;

/* Whether this kernel lets a tracing program schedule a task work (user
 * space tries probe_task_work first). Some refuse it: the callback is
 * sleepable, and they take it only from sleepable programs ("sleepable
 * callback in a program that is not sleepable"). There an entry's fill
 * ends lazily (TF_LAZY_END): with this 0 the verifier never reaches the
 * kfunc call and the object loads. */
const volatile __u32 task_works = 0;

extern void bpf_preempt_disable(void) __ksym;
extern void bpf_preempt_enable(void) __ksym;

/* A task work runs preemptible. A switch that preempted it inside its
 * task-storage lookup would find the storage busy (the lookup's per-CPU
 * guard) and lose the switch: the thread's time from its switch-in to
 * the next one went uncounted (tens of ms under CPU contention). */
static int close_fill(struct bpf_map *map, void *key, void *value)
{
	bpf_preempt_disable();
	struct tstate *s = current_state();
	if (s)
		end_fill(s, NULL, bpf_ktime_get_ns());
	bpf_preempt_enable();
	return 0;
}

/* User space attaches on_read_exit to a read-family syscall's exit
 * once a fill that must end lazily began in that syscall: until then no
 * syscall tracepoint is on, and every other process of the machine keeps
 * the syscall fast path; then only the exits of the syscalls that
 * filled run the program (and each costs an RCU grace period to
 * detach). The ring carries the syscall's bit, about once per syscall
 * each time the exits go on; lazy_woken holds the bits asked for. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} lazy_wake SEC(".maps");

__u32 lazy_woken = 0;

/* When a thread was last seen inside a fill that must end lazily, or
 * leaving a read-family syscall that filled (CLOCK_MONOTONIC ns, kept to
 * the millisecond: written at most once a millisecond, from any CPU).
 * User space takes the read exits off again once it has not moved for a
 * quiet spell (trace/pagecache's readExitsQuiet), clearing lazy_woken so
 * that the next such fill asks for them anew: a run that loads its model
 * and then computes for an hour slows the machine's other processes only
 * while it loads. */
__u64 lazy_seen_ns = 0;

static __always_inline void note_lazy_seen(__u64 now)
{
	if (now - lazy_seen_ns > 1000000)
		lazy_seen_ns = now;
}

/* The read family's bits, in trace/pagecache's readExits order, then
 * the bit that asks for on_rseq_return. */
#define READ_EXITS_ALL ((1u << 9) - 1)
#define RSEQ_BIT 9

/* Set by user space once on_rseq_return can be attached (the kernel has
 * rseq_update and task_struct's rseq area): then a fill of a thread with
 * an rseq area asks for it rather than for its syscall's exit, and a
 * switch out inside the fill makes its return seen (bpf/sched: on_switch
 * arms TF_RSEQ_END). Cleared again if the attach fails. */
__u32 rseq_ends = 0;

/* Fills on_rseq_return ended (the record's fills_ended_at_return). */
__u64 rseq_ended = 0;

/* When a fill last asked to end at its return (CLOCK_MONOTONIC ns, kept
 * to the millisecond like lazy_seen_ns). User space takes on_rseq_return
 * off once it has not moved for the read exits' quiet spell, clearing
 * RSEQ_BIT in lazy_woken so that the next such fill asks anew: every
 * other process of the machine pays the program's tracked test at each
 * return after a switch only while the run reads from disk. */
__u64 rseq_seen_ns = 0;

/* A read or pread64 asking for less than SMALL_READ bytes. Such a read
 * whose fill never switches out (its disk answered before it waited: a
 * sixth of a cold import's module reads on this VM) ends at the next
 * look without asking for the syscall's exit: what goes uncharged is its
 * copy to user space, a few microseconds, where asking would put every
 * task of the machine on the syscall slow path for the rest of the
 * import. Larger and other reads ask: their copies are most of a cold
 * read's CPU. */
#define SMALL_READ (64 * 1024)

static __always_inline bool small_read(struct task_struct *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || (long)regs->ax != -ENOSYS_)
		return false;
	long nr = regs->orig_ax;
	return (nr == NR_read || nr == NR_pread64) && regs->dx < SMALL_READ;
}

/* Whether task has registered an rseq area (glibc 2.35 and later do for
 * every thread; Go, musl and GLIBC_TUNABLES=glibc.pthread.rseq=0 do
 * not). */
static __always_inline bool has_rseq(struct task_struct *task)
{
	if (!bpf_core_field_exists(task->rseq))
		return false;
	return BPF_CORE_READ(task, rseq) != NULL;
}

static __always_inline int read_exit_bit(long id)
{
	switch (id) {
	case NR_read:
		return 0;
	case NR_pread64:
		return 1;
	case NR_readv:
		return 2;
	case NR_preadv:
		return 3;
	case NR_preadv2:
		return 4;
	case NR_sendfile:
		return 5;
	case NR_copy_file_range:
		return 6;
	case NR_splice:
		return 7;
	case NR_io_uring_enter:
		return 8;
	}
	return -1;
}

/* Ask user space for the read exit of syscall nr, or for
 * on_rseq_return (nr -1 with rseq set), unless asked already. A fault in
 * user space or any other syscall (execve) ends at the next look
 * whatever is attached. */
static __attribute__((noinline)) int wake_lazy(long nr, bool rseq)
{
	int bit = rseq ? RSEQ_BIT : read_exit_bit(nr);
	if (bit < 0 || bit > RSEQ_BIT)
		return 0;
	__u32 mask = 1u << bit;
	if (lazy_woken & mask)
		return 0;
	lazy_woken |= mask; /* racy: a second ask is dropped by user space */
	__u32 b = bit;
	bpf_ringbuf_output(&lazy_wake, &b, sizeof(b), 0);
	return 0;
}

/* Where there are no task works, a later look at the thread ends the
 * entry's fill or direct read (end_left_entry); each event program ends
 * with seen_in_entry. The caller has ended any fill of an entry the
 * thread has left, so an open one is this entry's. The entry is noted at
 * the end of the program, not here: a call here made on_get_pages's
 * frame too large for the verifier's limit with the Python walk below it. */
__noinline int ask_lazily(struct tstate *s);

static __always_inline void end_lazily(struct tstate *s)
{
	if (!(s->flags & TF_LAZY_END)) {
		s->flags |= TF_LAZY_END;
		s->entry = 0;
		ask_lazily(s);
	}
}

/* What a fill that must end lazily asks for. Global: verified once, not
 * at each fill-opening site. */
__noinline int ask_lazily(struct tstate *s)
{
	if (!s)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	/* A thread with an rseq area needs no syscall exit when it switches
	 * out inside the fill (as a cold read waiting for its disk does):
	 * its return is seen without putting every task of the machine on
	 * the syscall slow path. One that does not switch asks for its
	 * syscall's exit when its fill ends (ask_unseen). */
	if (rseq_ends && has_rseq(task)) {
		s->flags |= TF_RSEQ_THREAD;
		__u64 now = bpf_ktime_get_ns();
		if (now - rseq_seen_ns > 1000000)
			rseq_seen_ns = now;
		if (bpf_core_field_exists(task->ioac))
			s->fill_reads = task->ioac.syscr;
		if (small_read(task))
			s->flags |= TF_SMALL_READ;
		if (!(lazy_woken & (1u << RSEQ_BIT)))
			wake_lazy(-1, true);
	} else if ((lazy_woken & READ_EXITS_ALL) != READ_EXITS_ALL) {
		wake_lazy(current_syscall(task), false);
	}
	return 0;
}

/* The fill that end_left_entry just ended at the next look was an rseq
 * thread's that never switched out, and no exit saw its syscall return:
 * ask for that syscall's exit (the entry holds its number),
 * which ends its like from now on. */
static __always_inline void ask_unseen(struct tstate *s)
{
	if (!(s->flags & TF_ASK_EXIT))
		return;
	s->flags &= ~TF_ASK_EXIT;
	long nr = entry_syscall(s->entry);
	if (nr >= 0)
		wake_lazy(nr, false);
}

/* end_left_entry, then the ask it may leave. Global: verified once, not
 * in each of its six callers (inlined, it put 2,000 instructions on
 * on_add_to_cache's verification). */
__noinline int left_entry(struct tstate *s)
{
	if (!s)
		return 0;
	end_left_entry(s, NULL, bpf_get_current_task_btf(), 0);
	ask_unseen(s);
	return 0;
}

/* The thread was seen in the entry of its open fill or direct read: note
 * which entry that is (the first time), and when. */
static __always_inline void seen_in_entry(struct tstate *s)
{
	if (!(s->flags & TF_LAZY_END))
		return;
	if (!s->entry)
		s->entry = entry_of(bpf_get_current_task_btf());
	s->seen_ts = bpf_ktime_get_ns();
	/* The read exits' quiet clock: an rseq thread's fill needs them
	 * only if it returns unseen, which its exit notes (on_read_exit). */
	if (!(s->flags & TF_RSEQ_THREAD))
		note_lazy_seen(s->seen_ts);
}

/* Arrange for close_fill to run at the current entry's return to user
 * space (unless it is arranged already). False if it cannot be. */
static __always_inline bool close_at_return(struct tstate *s)
{
	if (s->flags & TF_END_PENDING)
		return true;
	if (!task_works) {
		end_lazily(s);
		return true;
	}
	__u32 slot = s->slot;
	struct fill_end *fe = bpf_map_lookup_elem(&fill_ends, &slot);
	/* bpf_core_type_exists is always true here; its relocation puts the
	 * whole task_struct into this object's BTF, which the kfunc's argument
	 * check needs (no program here reads a field of it, so clang would
	 * emit only a forward declaration). */
	if (fe && bpf_core_type_exists(struct task_struct) && bpf_task_work_schedule_resume_impl(bpf_get_current_task_btf(), &fe->tw, &fill_ends,
						      close_fill, NULL) == 0) {
		s->flags |= TF_END_PENDING;
		return true;
	}
	return false;
}

/* Open the current entry's fill interval at start (unless it is open)
 * and arrange for its close. Without a task work the interval is charged
 * up to now and closed, so that it cannot run on into user time. A
 * Python thread's interval carries its stack, taken here, in the filling
 * thread (another thread's its leaf native frame): its time is charged
 * per (file, stack) until the interval closes. Returns the interval's stack (0: none). */
static __always_inline __u64 open_fill(struct tstate *s, __u64 start, __u64 now)
{
	if (!(s->flags & TF_MISSED)) {
		s->flags |= TF_MISSED;
		struct thread *th = slot_thread(s);
		/* A fault's fill began at its filemap_fault; a switch out and
		 * back in since then was a wait, not the fill's CPU: the CPU
		 * part starts no earlier than the thread's switch in (else a
		 * fill's CPU could exceed its thread's). */
		if (th && (th->flags & TF_ON_CPU) && start < th->last_ts)
			start = th->last_ts;
		s->mark_ts = start;
		/* A thread without a Python stack gets its leaf native frame
		 * (on the read path, the C library's wrapper). */
		s->fill_stack = py_stack_or_leaf();
		if (th)
			th->fill_mark = start;
	}
	__u64 stack = s->fill_stack;
	if (close_at_return(s))
		return stack;
	count_lost(LOST_FILL_END);
	charge_miss(s, NULL, now);
	s->flags &= ~TF_MISSED;
	s->fill_stack = 0;
	struct thread *th = slot_thread(s);
	if (th)
		th->fill_mark = 0;
	return stack;
}

/* A BTF pointer's address as a plain number: a global function takes
 * no BTF pointer, and the verifier keeps a cast one a pointer. */
static __always_inline __u64 btf_addr(const void *p)
{
	__u64 a = 0;
	bpf_probe_read_kernel(&a, sizeof(a), &p);
	return a;
}

/* One step of a path's walk, run by bpf_loop: the verifier checks the
 * body once instead of once per unrolled step and per caller (which cost
 * 200 ms of start-up). A walk from an inode (mnt 0) goes up its dentries
 * to its filesystem's root; one from an open file also crosses its
 * mounts up to the process's root, as d_path does (emit_path's
 * PATH_VIEW). Every pointer is read as a number and the names' length
 * and count live in the scratch event: states the verifier can tell
 * apart by nothing, so it checks the body about once (a second walk with
 * pointers and counters in its context cost each program 2,600
 * instructions of verification). */
struct walk_ctx {
	__u64 dentry;
	__u64 mnt;      /* struct mount *, or 0: within the filesystem */
	__u64 root;     /* the process's root: its dentry */
	__u64 root_mnt; /* and its struct vfsmount * */
	__u32 done;     /* WALK_ROOT, WALK_OUTSIDE, or 0: cut */
	__u32 pad;
};

#define WALK_ROOT 1
#define WALK_OUTSIDE 2 /* the mount tree's top, not the process's root */

/* The walk's state, in a per-CPU map rather than the loop's context on
 * the stack: whatever the caller knew of it, the verifier sees any
 * value there, so it checks the step once per program however many
 * states reach the loop. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk_ctx);
} walk_state SEC(".maps");

/* The word at kernel address at (0 where it cannot be read), by the
 * JIT's fault-safe load through a read-only view rather than a probe
 * read, a helper call: the walks below and fault-around's folio walk
 * read many. Read as the first field of a view, a folio's flags word, so
 * that it is a number: a pointer field loaded through a view is a
 * pointer, which the verifier lets no arithmetic mix with another. */
static __always_inline __u64 read_addr(__u64 at)
{
	struct folio *w = bpf_rdonly_cast((void *)at, bpf_core_type_id_kernel(struct folio));
	return w->flags.f;
}

static long walk_step(__u64 i, void *unused)
{
	__u32 zero = 0;
	struct path_event *ev = bpf_map_lookup_elem(&path_scratch, &zero);
	struct walk_ctx *c = bpf_map_lookup_elem(&walk_state, &zero);
	if (!ev || !c)
		return 1;
	__u64 d = c->dentry, m = c->mnt;
	if (m) {
		if (d == c->root && m + bpf_core_field_offset(struct mount, mnt) == c->root_mnt) {
			c->done = WALK_ROOT;
			return 1;
		}
		if (d == read_addr(m + bpf_core_field_offset(struct mount, mnt.mnt_root))) {
			/* The top of this mount: on from where it is mounted. */
			__u64 up = read_addr(m + bpf_core_field_offset(struct mount, mnt_parent));
			if (!up || up == m) {
				c->done = WALK_OUTSIDE;
				return 1;
			}
			c->dentry = read_addr(m + bpf_core_field_offset(struct mount, mnt_mountpoint));
			c->mnt = up;
			return 0;
		}
	}
	/* An untrusted BTF pointer: its fields load directly (faults read
	 * as zero), no probe-read helper call per field. */
	struct dentry *dd = bpf_rdonly_cast((void *)d, bpf_core_type_id_kernel(struct dentry));
	__u64 parent = (__u64)dd->d_parent;
	if (!parent || parent == d) {
		c->done = m ? WALK_OUTSIDE : WALK_ROOT;
		return 1;
	}
	/* The name's own length, not a string copy: a name that fills its
	 * buffer exactly is then told from a longer one. */
	__u32 len = dd->d_name.len;
	__u32 off = ev->len;
	if (len > NAME_MAX_ || off > PATH_MAX_ || off + len + 1 > PATH_MAX_)
		return 1; /* cut: done stays 0 */
	__u32 at = off & (PATH_MAX_ - 1);
	if (bpf_probe_read_kernel(&ev->names[at], len, dd->d_name.name))
		return 1;
	ev->names[at + len] = 0;
	ev->len = off + len + 1;
	ev->depth++;
	c->dentry = parent;
	return 0;
}

/* A path record can be what attaches the JIT probes (a process maps
 * libcuda): it wakes the reader, which otherwise looks only every 400 ms
 * while the ring stays empty, at most every PATH_WAKE_NS. Records in
 * between wait for the reader's next look, 50 ms once it has seen one. */
#define PATH_WAKE_NS (50 * 1000 * 1000)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} path_wake SEC(".maps");

/* coldtrace's own mount namespace (its inode number; 0: unknown), set at
 * load. A path seen in another is named as that namespace's process saw
 * it, from its mounts, which user space reads from /proc/PID/mountinfo
 * while a process of the namespace lives: a reader alone in a namespace
 * of its own (unshare -m, then a bind mount) that exits milliseconds
 * after its reads was gone by the next look 50 ms on, and its file named
 * as the host sees it. Such a path wakes the reader at once, at most
 * every NS_WAKE_NS per namespace (a container importing 20,000 modules
 * wakes it 1,000 times a second at most). */
const volatile __u32 self_mnt_ns = 0;

#define NS_WAKE_NS (1000 * 1000)

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);   /* mount namespace */
	__type(value, __u64); /* its last wake-up */
} ns_wake SEC(".maps");

static __always_inline bool foreign_wake(__u32 mnt_ns, __u64 now)
{
	if (!self_mnt_ns || mnt_ns == self_mnt_ns)
		return false;
	__u64 *last = bpf_map_lookup_elem(&ns_wake, &mnt_ns);
	if (last && now - *last < NS_WAKE_NS)
		return false;
	if (last)
		*last = now;
	else
		bpf_map_update_elem(&ns_wake, &mnt_ns, &now, BPF_ANY);
	return true;
}

static __always_inline __u64 path_wakeup(__u32 mnt_ns)
{
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&path_wake, &zero);
	__u64 now = bpf_ktime_get_ns();
	if (ring_half_full(&paths) || (last && now - *last >= PATH_WAKE_NS) || foreign_wake(mnt_ns, now)) {
		if (last)
			*last = now; /* racing CPUs: at worst one more wake-up */
		return BPF_RB_FORCE_WAKEUP;
	}
	return BPF_RB_NO_WAKEUP;
}

/* The path a process in another mount namespace used.
 *
 * A file's path inside its filesystem names it as the host sees it; the
 * path a process in a container or behind a bind mount used goes through
 * its namespace's mounts, which user space reads from /proc while a
 * process of the namespace lives. A reader alone in a namespace of its
 * own (unshare -m, a bind mount, a read, exit) can be gone, or have
 * unmounted, before user space looks: its file went by the host's name,
 * about one case in 27 with both cores busy. So the first time a tracked
 * thread of another namespace touches a file, the path it used is walked
 * here, from an open file of its own on that inode (a descriptor, else a
 * mapping) through the mounts up to its root, as d_path would, and sent
 * as a PATH_VIEW record (emit_path) before the file's other record. */

/* The open files of a process, searched for one of an inode. */
struct fd_scan {
	__u64 fds;   /* struct file ** */
	__u64 inode;
	__u64 found; /* struct file * */
	__u32 n;
};

/* A process with more descriptors than this is searched in its first ones. */
#define VIEW_MAX_FDS 4096

#define OVERLAYFS_SUPER_MAGIC_ 0x794c7630

/* Whether fp is an overlayfs file whose real file (the layer's, which
 * owns the page cache) is inode: the process opened the file through
 * the overlay (a container's image), and fp's path is the one it used. */
static __always_inline bool overlay_of(struct file *fp, __u64 inode)
{
	if (!bpf_core_type_exists(struct ovl_file))
		return false;
	struct inode *fi = bpf_rdonly_cast(fp->f_inode, bpf_core_type_id_kernel(struct inode));
	if (!fi || fi->i_sb->s_magic != OVERLAYFS_SUPER_MAGIC_)
		return false;
	struct ovl_file *of = bpf_rdonly_cast(fp->private_data, bpf_core_type_id_kernel(struct ovl_file));
	if (!of)
		return false;
	struct file *real = bpf_rdonly_cast(of->realfile, bpf_core_type_id_kernel(struct file));
	struct file *upper = bpf_rdonly_cast(of->upperfile, bpf_core_type_id_kernel(struct file));
	return (real && (__u64)real->f_inode == inode) || (upper && (__u64)upper->f_inode == inode);
}

static long fd_step(__u64 i, struct fd_scan *c)
{
	if (i >= c->n)
		return 1;
	__u64 f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), (void *)(c->fds + i * sizeof(f))) || !f)
		return 0;
	struct file *fp = bpf_rdonly_cast((void *)f, bpf_core_type_id_kernel(struct file));
	if ((__u64)fp->f_inode == c->inode || overlay_of(fp, c->inode)) {
		c->found = f;
		return 1;
	}
	return 0;
}

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task, __u64 addr) __ksym __weak;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym __weak;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym __weak;

/* The struct path of a struct file (a kernel address), as a number. */
static __always_inline __u64 file_path(__u64 file)
{
	return file + bpf_core_field_offset(struct file, f_path);
}

/* MNT_NS_INTERNAL: the namespace of a kernel-internal mount, such as an
 * overlay's private clones of its layers. */
#define MNT_NS_INTERNAL_ ((__u64)-22)

/* The path a mapping's file stands for: its own, or, for the backing
 * file an overlay maps in its place (a file on one of the overlay's
 * internal layer mounts), the overlay path the process opened. */
static __always_inline __u64 mapped_path(__u64 file)
{
	__u64 m = read_addr(file + bpf_core_field_offset(struct file, f_path.mnt)) - bpf_core_field_offset(struct mount, mnt);
	if (bpf_core_type_exists(struct backing_file) &&
	    read_addr(m + bpf_core_field_offset(struct mount, mnt_ns)) == MNT_NS_INTERNAL_)
		return file - bpf_core_field_offset(struct backing_file, file) +
		       bpf_core_field_offset(struct backing_file, user_path);
	return file_path(file);
}

/* The path through which the current process has inode open (a struct
 * path's address): the descriptor the read syscall names, any
 * descriptor (an overlay's file whose real file is inode among them),
 * else a mapping (a file mapped and closed); 0 when it has none (an
 * io_uring registered file whose descriptor is closed). */
static __always_inline __u64 own_path(struct task_struct *task, __u64 inode)
{
	struct file *f = syscall_read_file(task);
	if (f && (__u64)BPF_CORE_READ(f, f_inode) == inode)
		return file_path(btf_addr(f));
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (fdt) {
		struct fd_scan c = {.inode = inode};
		c.fds = (__u64)BPF_CORE_READ(fdt, fd);
		c.n = BPF_CORE_READ(fdt, max_fds);
		if (c.n > VIEW_MAX_FDS)
			c.n = VIEW_MAX_FDS;
		bpf_loop(VIEW_MAX_FDS, fd_step, &c, 0);
		if (c.found)
			return file_path(c.found);
	}
	if (!bpf_iter_task_vma_new)
		return 0;
	__u64 found = 0;
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;
	bpf_iter_task_vma_new(&it, task, 0);
	while ((vma = bpf_iter_task_vma_next(&it))) {
		/* Read through a read-only view: a load from the trusted
		 * pointer costs the verifier a search of the kernel's BTF. */
		struct vm_area_struct *v = BTF_VIEW(vma, struct vm_area_struct);
		struct file *vf = BTF_VIEW(v->vm_file, struct file);
		if (vf && (__u64)vf->f_inode == inode) {
			found = btf_addr(vf);
			break;
		}
	}
	bpf_iter_task_vma_destroy(&it);
	return found ? mapped_path(found) : 0;
}

/* The path of the overlay file through which the current read-family
 * syscall (sendfile, splice and copy_file_range included) reads inode
 * (its real file's), or 0: a process of coldtrace's own namespace
 * reading through an overlay mount. */
static __always_inline __u64 overlay_read_path(__u64 inode)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	long fd = read_input_fd(current_syscall(task), BPF_CORE_READ(regs, di), BPF_CORE_READ(regs, si));
	struct file *f = fd >= 0 ? task_fd_file(task, fd) : NULL;
	if (!f)
		return 0;
	struct file *fp = bpf_rdonly_cast(f, bpf_core_type_id_kernel(struct file));
	return overlay_of(fp, inode) ? file_path(btf_addr(f)) : 0;
}

/* Whether thread t (the current task) is in a mount namespace other
 * than coldtrace's (0: unknown, then none is). The namespace is read
 * again only when the task's nsproxy is not the one t last saw. */
static __always_inline bool foreign_ns(struct tstate *t)
{
	if (!self_mnt_ns)
		return false;
	struct task_struct *task = BTF_VIEW(bpf_get_current_task_btf(), struct task_struct);
	__u64 ns = (__u64)task->nsproxy;
	if (ns != t->nsproxy) {
		t->nsproxy = ns;
		t->foreign_ns = task->nsproxy->mnt_ns->ns.inum != self_mnt_ns;
	}
	return t->foreign_ns;
}

/* Whether the struct path at path (an address) lies on an overlay. */
static __always_inline bool on_overlay(__u64 path)
{
	__u64 vfsmnt = read_addr(path + bpf_core_field_offset(struct path, mnt));
	__u64 sb = read_addr(vfsmnt + bpf_core_field_offset(struct vfsmount, mnt_sb));
	__u64 magic = read_addr(sb + bpf_core_field_offset(struct super_block, s_magic));
	return magic == OVERLAYFS_SUPER_MAGIC_;
}

/* emit_path's path_addr for a view that is sent only if the process
 * has the file open through an overlay. */
#define VIEW_OVERLAY_ONLY 1

/* Sends the path of inode (a kernel address) as a record of kind: its
 * path inside its filesystem, or, for PATH_VIEW, the path through which
 * the current process has it open (path_addr, that struct path, if known)
 * across its mounts up to its root; no view when it has no open file of
 * it, or the file lies outside its root.
 * Global: the verifier checks it once per program, not once for each of
 * the dozens of states its callers reach it in (each of which walked the
 * dentry loop again: most of on_add_to_cache's verification). One walk
 * for both kinds: a second one cost each program as much again. */
__noinline int emit_path(struct tstate *t, __u64 inode_addr, struct file_key *key, __u32 kind, __u64 path_addr)
{
	if (!t || !key || !inode_addr)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 zero = 0;
	struct path_event *ev = bpf_map_lookup_elem(&path_scratch, &zero);
	struct walk_ctx *c = bpf_map_lookup_elem(&walk_state, &zero);
	if (!ev || !c)
		return 0;
	c->mnt = 0;
	c->done = 0;
	bool overlay_only = path_addr == VIEW_OVERLAY_ONLY;
	__u64 first = 0;
	if (kind != PATH_VIEW) {
		first = read_addr(inode_addr + bpf_core_field_offset(struct inode, i_dentry.first));
		if (!first)
			return 0;
	}
	/* A file with several names in the kernel's cache (hard links: uv
	 * and conda link the packages they install from their caches, perf
	 * links every binary it records into its build-id cache) is named
	 * by the one this process opened or mapped it through: the kernel
	 * lists a file's names newest first, so a cache's link made after
	 * the program's own named the program's file. (An alias's list node
	 * holds the next one first.) One call site: own_path's loops,
	 * inlined twice, would be verified twice. */
	if (kind == PATH_VIEW ? !path_addr || overlay_only : read_addr(first) != 0)
		path_addr = own_path(task, inode_addr);
	if (kind == PATH_VIEW) {
		if (!path_addr || (overlay_only && !on_overlay(path_addr)))
			return 0;
		c->dentry = read_addr(path_addr + bpf_core_field_offset(struct path, dentry));
		c->mnt = read_addr(path_addr + bpf_core_field_offset(struct path, mnt)) - bpf_core_field_offset(struct mount, mnt);
		__u64 fs = read_addr(btf_addr(task) + bpf_core_field_offset(struct task_struct, fs));
		if (!fs)
			return 0;
		c->root = read_addr(fs + bpf_core_field_offset(struct fs_struct, root.dentry));
		c->root_mnt = read_addr(fs + bpf_core_field_offset(struct fs_struct, root.mnt));
	} else {
		c->dentry = first - bpf_core_field_offset(struct dentry, d_u.d_alias);
		/* The process's own name, where its dentry is the file's own
		 * (an overlay's file names the overlay's dentry, whose path
		 * lies in another filesystem than the file's). */
		__u64 own = path_addr ? read_addr(path_addr + bpf_core_field_offset(struct path, dentry)) : 0;
		if (own && read_addr(own + bpf_core_field_offset(struct dentry, d_inode)) == inode_addr)
			c->dentry = own;
	}
	ev->len = 0;
	ev->depth = 0;
	/* Every name takes at least 2 bytes (one and its NUL), one more
	 * step finds the root, and each mount crossed takes one. */
	bpf_loop(PATH_MAX_ / 2 + 64, walk_step, NULL, 0);
	__u32 done = c->done;
	if (done == WALK_OUTSIDE)
		return 0;
	ev->mnt_ns = BPF_CORE_READ(task, nsproxy, mnt_ns, ns.inum);
	ev->tgid = t->tgid;
	ev->kind = kind;
	ev->tid = (__u32)bpf_get_current_pid_tgid();
	ev->ts = bpf_ktime_get_ns();
	ev->cpu_ns = thread_cpu(slot_thread(t), ev->ts);
	ev->dev = key->dev;
	ev->gen = key->gen;
	ev->ino = key->ino;
	ev->ctime_sec = 0;
	if (bpf_core_field_exists(struct inode, i_ctime_sec))
		ev->ctime_sec = read_addr(inode_addr + bpf_core_field_offset(struct inode, i_ctime_sec));
	ev->truncated = !done;
	__u32 off = ev->len;
	if (off > PATH_MAX_)
		off = PATH_MAX_;
	__u64 size = offsetof(struct path_event, names) + off;
	if (size > sizeof(*ev))
		size = sizeof(*ev);
	/* A view wakes no one: the file's first-sight record, when it
	 * follows, wakes the reader as paths do; a view alone waits for the
	 * reader's next look, and holds all it needs. */
	__u64 wake = kind == PATH_VIEW ? BPF_RB_NO_WAKEUP : path_wakeup(ev->mnt_ns);
	if (bpf_ringbuf_output(&paths, ev, size, wake))
		count_lost(LOST_RINGBUF);
	return 0;
}

/* Devices coldtrace's own namespace mounts more than once where one
 * mount's root holds another's (a bind mount of a directory of the same
 * filesystem): a file there has several names in the namespace, and is
 * named by the one its first reader used, walked through the reader's
 * mounts (a view), as in another namespace. Filled by user space from
 * its mount table before the command starts; mounts made later are not
 * in it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* the superblock's dev */
	__type(value, __u8);
} bind_devs SEC(".maps");

/* The first touch of a file by a tracked thread of another mount
 * namespace sends the path it used (fs: the file's entry; path_addr the
 * struct path it used, if known), as does a thread of coldtrace's own
 * namespace that first touches a file of a bind-mounted device
 * (bind_devs), or first touches the file through an overlay mount (a read
 * syscall's file, or, for a fault, its descriptors and mappings). Host
 * processes pay the call and the namespace test, and, at a file's first
 * sight, the overlay test. Global: inlined, its branches
 * doubled the states of the rest of its callers (on_add_to_cache 1,300
 * instructions more to verify). */
__noinline int send_view(struct tstate *t, __u64 inode_addr, __u64 path_addr, struct file_key *key,
			 struct file_stats *fs)
{
	if (!t || !fs || !key || fs->view_sent)
		return 0;
	if (!foreign_ns(t)) {
		if (fs->path_sent)
			return 0;
		__u32 dev = key->dev;
		/* Several names in this namespace (a bind-mounted device): the
		 * reader's, from the path given or its own open file or mapping
		 * of the file (none: no view). */
		if (!bpf_map_lookup_elem(&bind_devs, &dev)) {
			/* A fault or an io_uring request first (outside a
			 * syscall, or in io_uring_enter): the file may be mapped
			 * or read from an overlay (a backing file, or a
			 * descriptor on the overlay): looked up in full, sent only
			 * if so. Once per file, for files a process maps or reads
			 * that way before reading them. */
			long nr = current_syscall(bpf_get_current_task_btf());
			if (nr < 0 || nr == NR_io_uring_enter)
				path_addr = VIEW_OVERLAY_ONLY;
			else if (!(path_addr = overlay_read_path(inode_addr)))
				return 0;
		}
	}
	fs->view_sent = 1;
	return emit_path(t, inode_addr, key, PATH_VIEW, path_addr);
}

static __always_inline bool same_file(struct file_key *a, struct file_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->gen == b->gen;
}

/* Which read the current task is in: the count of read syscalls it has
 * completed (vfs_read, readv, sendfile, splice and copy_file_range count
 * theirs at their end), else, on a kernel without I/O accounting, its
 * syscall and arguments hashed. Batches of one read share it. */
static __always_inline __u64 read_sig(struct task_struct *task, bool *exact)
{
	if (bpf_core_field_exists(task->ioac)) {
		*exact = true;
		return task->ioac.syscr; /* a BTF pointer: a plain load */
	}
	*exact = false;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	return regs->orig_ax ^ (regs->di * 0x9E3779B97F4A7C15ull) ^ (regs->si * 0xC2B2AE3D27D4EB4Full) ^
	       (regs->dx * 0x165667B19E3779F9ull) ^ (regs->r10 * 0x27D4EB2F165667C5ull);
}

/* The page the current read started at, or -1 when unknown: the offset
 * argument of pread and preadv, the file position of read and readv
 * (which moves only at their return); for sendfile, splice and
 * copy_file_range, the offset their pointer argument names (the kernel
 * copies it in at entry and back at return) or, without one, the input
 * file's position. */
static __always_inline __s64 read_start(struct task_struct *task, struct address_space *mapping)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || (long)regs->ax != -ENOSYS_)
		return -1;
	__s64 pos = regs->r10;
	__u64 at = 0;
	switch (regs->orig_ax) {
	case NR_pread64:
	case NR_preadv:
		return pos >= 0 ? pos >> 12 : -1;
	case NR_preadv2:
		if (pos != -1)
			return pos >= 0 ? pos >> 12 : -1;
		break;
	case NR_read:
	case NR_readv:
		break;
	case NR_sendfile:
		at = regs->dx;
		break;
	case NR_splice:
	case NR_copy_file_range:
		at = regs->si;
		break;
	default:
		return -1;
	}
	if (at) {
		if (bpf_probe_read_user(&pos, sizeof(pos), (void *)at))
			return -1;
		return pos >= 0 ? pos >> 12 : -1;
	}
	long fd = read_input_fd(regs->orig_ax, regs->di, regs->si);
	struct file *f = fd >= 0 ? task_fd_file(task, fd) : NULL;
	if (!f)
		return -1;
	if (BPF_CORE_READ(f, f_mapping) != mapping)
		return -1;
	pos = BPF_CORE_READ(f, f_pos);
	return pos >= 0 ? pos >> 12 : -1;
}

/* io_uring read requests submitted by tracked threads, by their file and
 * last page: the tracepoint of each batch of folios names the request's
 * last page (its position plus what is left to read, which move
 * together), whichever thread does the read and however often it is
 * retried. A cold batch whose last folio is still being read returns
 * without the tracepoint, and no read syscall gives the request's start
 * (the submitter's inline attempt, a retry from task work, an io-wq
 * worker): 106 of a 96 MiB file's 24,576 pages went uncounted, read in
 * 132 KiB requests. The value is the request's first page not counted
 * yet, its start at submission. */
struct uring_read_key {
	struct file_key file;
	__u64 last;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct uring_read_key);
	__type(value, __u64);
} uring_reads SEC(".maps");

/* Set once a request is noted: until then no read looks one up (the
 * context test reads the thread's registers, at every batch). */
__u32 uring_noted = 0;

/* include/linux/sched.h: the task is an io_uring worker. */
#define PF_IO_WORKER_ 0x00000010

/* Whether the thread may be doing an io_uring request's read: an io-wq
 * or SQPOLL worker, a submitter in io_uring_enter, or task work run on
 * the way back to user space (regs->ax holds a return value then). */
static __always_inline bool in_uring(struct task_struct *task)
{
	if (task->flags & PF_IO_WORKER_)
		return true;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return false;
	return (long)regs->ax != -ENOSYS_ || regs->orig_ax == NR_io_uring_enter;
}

/* Whether the current syscall reads its file in pipe-sized chunks, one
 * after the other, each from where the last ended: sendfile, splice and
 * copy_file_range. A batch of theirs past the previous chunk's end
 * follows pages a batch without the tracepoint got. */
static __always_inline bool in_chunks(struct task_struct *task)
{
	long nr = current_syscall(task);
	return nr == NR_sendfile || nr == NR_splice || nr == NR_copy_file_range;
}

/* read(2) and its kin (pread, readv, sendfile, splice, copy_file_range)
 * call filemap_get_pages once per batch of folios, and its tracepoint
 * gives the read's whole remaining range [lo, hi] each time: summing the
 * ranges, one 64 MiB read counted 4.9 GiB and a 2,048-page file read by
 * dd bs=4M counted 34,445 pages. Each page is counted once per read
 * instead: the first traced batch of a read counts its range, later ones
 * only what lies past it. A cold batch whose last folio is still being
 * read returns without the tracepoint, so the first traced batch of a
 * read may start past the read's start: unless it starts where the
 * thread's previous read of the file ended, the read's start is looked
 * up (the fd table walk costs a few probe reads; sequential reads skip
 * it). Returns the first page to count. */
static __always_inline __u64 count_read(struct tstate *t, struct address_space *mapping, struct file_key *key,
					__u64 lo, __u64 hi, __u64 last)
{
	struct task_struct *task = bpf_get_current_task_btf();
	bool exact;
	__u64 sig = read_sig(task, &exact);
	bool same = same_file(&t->rd_file, key);
	__u64 from = lo;
	__u64 *next = NULL;
	if (uring_noted && in_uring(task)) {
		struct uring_read_key uk = {.file = *key, .last = last};
		next = bpf_map_lookup_elem(&uring_reads, &uk);
	}
	if (next) {
		/* An io_uring request's: every page from its start counted
		 * once, by the first traced batch of any of its passes. */
		from = *next;
		if (hi + 1 > from)
			*next = hi + 1;
		t->rd_file = *key;
		t->rd_sig = sig;
		t->rd_next = hi + 1;
	} else if (same && t->rd_sig == sig && (exact || lo > t->rd_index)) {
		/* A later batch of the read in progress. A batch of one read
		 * never starts past the end its first batch gave (rd_next),
		 * but for the chunks of a sendfile, splice or copy_file_range
		 * (each chunk's batches name only the chunk): past it, the
		 * chunk's first batch went without the tracepoint and the gap
		 * was read. Any other batch past it is another request with
		 * no read syscall in between (io_uring's, in the submitter or
		 * an io-wq worker, whose workers take turns on a file's
		 * chunks), and the gap before it is not read. */
		from = lo;
		if (t->rd_next > lo || (t->rd_next < lo && in_chunks(task)))
			from = t->rd_next;
		if (hi + 1 > t->rd_next)
			t->rd_next = hi + 1;
	} else {
		/* A batch at the file's first page has no earlier start to
		 * find (most reads of small files): the descriptor walk of
		 * read_start, six probe reads, is skipped. */
		if (lo > 0 && (!same || lo != t->rd_next)) {
			__s64 start = read_start(task, mapping);
			if (start >= 0 && (__u64)start < lo)
				from = start;
		}
		t->rd_file = *key;
		t->rd_sig = sig;
		t->rd_next = hi + 1;
	}
	t->rd_index = lo;
	return from;
}

/* An untraced process that inserted pages of a file this long ago is
 * still reading it from disk: the pages a traced read gets from it were
 * read from disk for both. */
#define SHARED_WINDOW_NS (100 * 1000 * 1000)

/* One block of mark_inserted (unrolled, the 17 blocks multiplied the
 * verifier's states of on_add_to_cache: a quarter of a second of every
 * start went to checking it). */
static long mark_block(__u64 i, struct block_walk *c)
{
	__u64 m = 0;
	long step = walk_block(i, c, &m);
	if (step <= 0)
		return step < 0;
	struct run_block *rb = bpf_map_lookup_elem(&run_pages, &c->bk);
	if (!rb) {
		struct run_block nb = {};
		nb.inserted = m;
		if (bpf_map_update_elem(&run_pages, &c->bk, &nb, BPF_NOEXIST) == 0)
			return 0;
		rb = bpf_map_lookup_elem(&run_pages, &c->bk);
		if (!rb) {
			count_lost(LOST_PAGES);
			return 0;
		}
	}
	c->again += __builtin_popcountll(rb->evicted & rb->inserted & m);
	rb->evicted &= ~m;
	rb->inserted |= m;
	return 0;
}

/* Marks pages [lo, hi] of key (its entry fs) as inserted by the run and
 * returns how many of them had been inserted by it before and evicted
 * since. The first block's marks are the file's entry's (file_stats'
 * blk0_*): a file that fits in it (a module's bytecode) enters no table
 * here. Global: checked once, not in each state on_add_to_cache reaches
 * it in. */
__noinline __u64 mark_inserted(struct file_key *key, struct file_stats *fs, __u64 lo, __u64 hi)
{
	if (!key || !fs)
		return 0;
	__u64 again = 0;
	if (lo < RUN_PAGES_BLOCK) {
		__u64 m = block_mask(0, lo, hi);
		again = __builtin_popcountll(fs->blk0_evicted & fs->blk0_inserted & m);
		fs->blk0_evicted &= ~m;
		fs->blk0_inserted |= m;
		if (hi < RUN_PAGES_BLOCK)
			return again;
	}
	struct block_walk c = {};
	start_walk(&c, key, lo, hi);
	bpf_loop(MAX_FOLIO_BLOCKS, mark_block, &c, 0);
	return again + c.again;
}

/* The Python files each process has read, so each gets one record. */
struct py_seen_key {
	__u32 tgid;
	__u32 dev;
	__u64 ino;
	__u32 gen;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct py_seen_key);
	__type(value, __u8);
} py_seen SEC(".maps");

/* Whether the file's name ends in ".py" or ".pyc": a direct load of the
 * name's length and one probe read of its last four bytes, paid by every
 * read (batch) of a traced thread. */
static __always_inline bool python_file(struct inode *inode)
{
	struct hlist_node *first = inode->i_dentry.first;
	if (!first)
		return false;
	__u64 dp = (__u64)((void *)first - bpf_core_field_offset(struct dentry, d_u.d_alias));
	struct dentry *d = bpf_rdonly_cast((void *)dp, bpf_core_type_id_kernel(struct dentry));
	__u32 len = d->d_name.len;
	if (len < 4 || len > 255)
		return false;
	/* The name's last four bytes, from one fault-safe load of the eight
	 * that end it (or begin it: a name under eight bytes is stored
	 * inline in its dentry, whose buffer holds them) rather than a probe
	 * read's helper call. */
	__u64 name = (__u64)d->d_name.name;
	__u32 skip = len >= 8 ? 4 : len - 4;
	__u32 tail = (__u32)(read_addr(name + (len >= 8 ? len - 8 : 0)) >> (8 * skip));
	/* Little-endian: ".pyc" is 0x6379702e; "?.py" ends in ".py". */
	return tail == 0x6379702e || (tail >> 8) == 0x79702e;
}

/* The first read of a Python file by a Python process: a record (see
 * enum path_kind), unless the file's first sight sent it (fs: the file's
 * entry, if it has one). Other programs reading .py files pay one flag
 * test. */
static __always_inline void python_read(struct tstate *t, struct inode *inode, struct file_key *key,
					struct file_stats *fs)
{
	if (!(t->flags & TF_PYTHON) || (fs && fs->py_read_tgid == t->tgid) || !python_file(inode))
		return;
	struct py_seen_key k = {.tgid = t->tgid, .dev = key->dev, .ino = key->ino, .gen = key->gen};
	if (bpf_map_lookup_elem(&py_seen, &k))
		return;
	__u8 one = 1;
	bpf_map_update_elem(&py_seen, &k, &one, BPF_ANY);
	emit_path(t, btf_addr(inode), key, PATH_PY_READ, 0);
}

/* The pages of [lo, hi] of key that t's latest fault range does not hold,
 * the range becoming [lo, hi]. A fault first maps what is cached around
 * its page (mm_filemap_map_pages reports the whole window, mapped or
 * not) and, when its own page was not there, faults it in
 * (mm_filemap_fault): a page of the window just counted. The windows
 * are aligned (fault_around_bytes), so the next fault's window is the
 * same one or another. Counting both over-counted a cold mapped read by
 * 1-8% (one page per readahead). Only the latest range is held: a page
 * touched again much later, mapped again, counts again. */
static __always_inline __u64 map_new_pages(struct tstate *t, struct file_key *key, __u64 lo, __u64 hi)
{
	__u64 n = hi - lo + 1;
	if (same_file(&t->map_file, key) && lo <= t->map_hi && hi >= t->map_lo) {
		__u64 olo = lo > t->map_lo ? lo : t->map_lo;
		__u64 ohi = hi < t->map_hi ? hi : t->map_hi;
		n -= ohi - olo + 1;
		/* A lone fault inside the window leaves the window held. */
		if (lo >= t->map_lo && hi <= t->map_hi)
			return n;
	}
	t->map_file = *key;
	t->map_lo = lo;
	t->map_hi = hi;
	return n;
}

/* The pages [lo, hi] of the folio that holds page index of mapping, if
 * the page cache holds one: a walk of its xarray (nodes of 64 slots,
 * six bits of the index a level; a large folio's other slots in a node
 * are siblings naming its first), in the RCU read section the program
 * runs in. The folio found must name mapping and hold index, or it is
 * not taken (a node freed under the walk). */
#define XA_DEPTH 8 /* 48 bits of page index: 1 EiB files */

static __always_inline bool folio_span(struct address_space *mapping, __u64 index, __u64 *lo, __u64 *hi)
{
	__u64 e = read_addr((__u64)mapping + bpf_core_field_offset(struct address_space, i_pages.xa_head));
	__u64 slots = bpf_core_field_offset(struct xa_node, slots);
	for (int i = 0; i < XA_DEPTH; i++) {
		/* an internal entry above 4096: a node */
		if ((e & 3) != 2 || e <= 4096)
			break;
		__u64 node = e - 2;
		struct xa_node *xn = bpf_rdonly_cast((void *)node, bpf_core_type_id_kernel(struct xa_node));
		__u64 at = (index >> (xn->shift & 63)) & 63;
		e = read_addr(node + slots + at * 8);
		/* a sibling: the internal entry of its first slot's number */
		if ((e & 3) == 2 && e < 256) {
			at = (e >> 2) & 63;
			e = read_addr(node + slots + at * 8);
		}
	}
	if (!e || (e & 3)) /* none, a shadow entry or an internal one */
		return false;
	struct folio *f = bpf_rdonly_cast((void *)e, bpf_core_type_id_kernel(struct folio));
	if (f->mapping != mapping)
		return false;
	__u32 order = 0;
	if (f->flags.f & (1ull << bpf_core_enum_value(enum pageflags, PG_head)))
		order = f->_flags_1 & 0xff;
	__u64 first = f->index, n = 1ull << (order & 31);
	if (index < first || index >= first + n)
		return false;
	*lo = first;
	*hi = first + n - 1;
	return true;
}

/* [*lo, *hi] widened to the folios that hold its ends: a fault maps a
 * large folio whole where it fits the mapping and its page table (the
 * kernel's fault-around, 6.18), while the tracepoints name only the
 * fault-around window or the faulting page, and the folio's other pages
 * then take no fault to count them by (6,704 of a 32 MiB file's 8,192
 * pages counted, read a byte a page). */
static __always_inline void widen_to_folios(struct address_space *mapping, __u64 *lo, __u64 *hi)
{
	__u64 flo, fhi;
	bool got = folio_span(mapping, *lo, &flo, &fhi);
	if (got && flo < *lo)
		*lo = flo;
	if (got && fhi >= *hi) { /* one folio holds both ends */
		*hi = fhi;
		return;
	}
	if (folio_span(mapping, *hi, &flo, &fhi) && fhi > *hi)
		*hi = fhi;
}

/* start: when the entry's fill began if it misses here, or 0 for now.
 * batched: a read's batch (get_pages), whose range is the read's rest. */
static __always_inline void on_access(struct tstate *t, struct address_space *mapping, __u64 lo, __u64 hi,
				      __u64 start, bool batched)
{
	if (hi < lo)
		return;
	/* tp_btf arguments are BTF pointers: plain loads, no helper calls. */
	struct inode *inode = mapping->host;
	struct file_key key = {};
	key.dev = inode->i_sb->s_dev;
	key.gen = inode->i_generation;
	key.ino = inode->i_ino;
	t->cur = key;
	/* A read asks for its whole buffer; count the pages the file has. */
	__u64 size = inode->i_size;
	__u64 npages = (size + 4095) >> 12;
	__u64 last = hi;
	if (hi >= npages) {
		if (lo >= npages)
			return;
		hi = npages - 1;
	}
	__u64 from = batched ? count_read(t, mapping, &key, lo, hi, last) : lo;
	__u64 pages = hi >= from ? hi - from + 1 : 0;
	if (!batched)
		pages = map_new_pages(t, &key, lo, hi);
	/* Only reads of small files go uncounted per file: a mapped file is
	 * a library or a model far more often than a module, and its first
	 * sight is what probes a library's compile entry points (the JIT
	 * sensor's uprobes), warm or not. */
	bool small = batched && size < SMALL_FILE_BYTES;
	struct file_stats *fs = small && !maybe_has_entry(&key) ? NULL : file_get(&key, !small);
	if (batched)
		python_read(t, inode, &key, fs);
	if (!fs) {
		__u32 zero = 0;
		__u64 *n = small ? bpf_map_lookup_elem(&small_hits, &zero) : NULL;
		if (n)
			*n += pages;
		return;
	}
	if (pages)
		__sync_fetch_and_add(&fs->accessed, pages);
	fs->last_tgid = t->tgid;
	/* Another process is reading this file from disk right now: the
	 * pages this read gets came from disk through it, and the entry
	 * waits for them (its folio-lock waits are I/O waits) and copies
	 * them. The entry is charged as a fill; the pages are no hits a
	 * rerun could expect. */
	__u64 other = fs->other_ins_ts;
	bool fills = false;
	if (other) {
		__u64 now = bpf_ktime_get_ns();
		if (now >= other && now - other < SHARED_WINDOW_NS) {
			if (pages)
				__sync_fetch_and_add(&fs->shared, pages);
			fills = true;
		}
	}
	/* A read or a fault consumes the pages it names. Fault-around
	 * (map_pages) names its whole range yet maps only the pages already
	 * read in: the fault that follows on a page of the range still under
	 * I/O waits for the thread's own readahead, and must find it still
	 * unconsumed so that its wait is the fill's (and its stack's).
	 * Measured on a cold 256 MiB mapping: each such wait ~1 ms, 5-14% of
	 * the file's wait went without a stack. */
	if (same_file(&t->ra_file, &key) && hi >= t->ra_lo && lo <= t->ra_hi) {
		if ((batched || start) && hi + 1 > t->ra_lo)
			t->ra_lo = hi + 1;
		fills = true;
	}
	/* One call site: open_fill inlined twice made this chain's frame
	 * too large for the verifier's limit with the Python walk. */
	if (fills) {
		__u64 now = bpf_ktime_get_ns();
		open_fill(t, start ? start : now, now);
	}
	if (pages && (t->flags & TF_MISSED) && t->fill_stack)
		file_stack_add(key_dev_gen(&key), key.ino, t->fill_stack, FS_READ, pages);
	send_view(t, btf_addr(inode), 0, &key, fs);
	if (!fs->path_sent) {
		fs->path_sent = 1;
		emit_path(t, btf_addr(inode), &key, PATH_SEEN, 0);
	}
}

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(on_get_pages, struct address_space *mapping_arg, unsigned long index, unsigned long last_index)
{
	struct address_space *mapping = BTF_VIEW(mapping_arg, struct address_space);
	struct tstate *t = current_state();
	if (t) {
		left_entry(t);
		on_access(t, mapping, index, last_index, 0, true);
		seen_in_entry(t);
	}
	return 0;
}

SEC("tp_btf/mm_filemap_map_pages")
int BPF_PROG(on_map_pages, struct address_space *mapping_arg, unsigned long start, unsigned long end)
{
	struct address_space *mapping = BTF_VIEW(mapping_arg, struct address_space);
	struct tstate *t = current_state();
	if (t) {
		left_entry(t);
		__u64 lo = start, hi = end;
		widen_to_folios(mapping, &lo, &hi);
		on_access(t, mapping, lo, hi, 0, false);
		seen_in_entry(t);
	}
	return 0;
}

/* The file an io_uring request reads: the submitter's descriptor, or the
 * ring's registered file of that index (IOSQE_FIXED_FILE). NULL where
 * neither can be read. Probe reads: one submission's worth. */
static __always_inline struct file *uring_file(struct io_kiocb *req)
{
	/* REQ_F_FIXED_FILE_BIT mirrors IOSQE_FIXED_FILE_BIT, as
	 * REQ_F_BUFFER_SELECT_BIT does IOSQE_BUFFER_SELECT_BIT (the uapi's
	 * bit numbers: an anonymous enum, which CO-RE cannot relocate) */
	__u32 fd = req->cqe.fd;
	if (!(req->flags & (1ull << REQ_F_FIXED_FILE_BIT)))
		return task_fd_file(bpf_get_current_task_btf(), fd);
	if (!bpf_core_field_exists(struct io_rsrc_node, file_ptr))
		return NULL;
	struct io_ring_ctx *ctx = req->ctx;
	if (fd >= ctx->file_table.data.nr)
		return NULL;
	struct io_rsrc_node **nodes = ctx->file_table.data.nodes;
	struct io_rsrc_node *node = NULL;
	if (bpf_probe_read_kernel(&node, sizeof(node), &nodes[fd]) || !node)
		return NULL;
	/* io_uring/filetable.h: the low bits are flags (FFS_MASK) */
	return (struct file *)(BPF_CORE_READ(node, file_ptr) & ~3ul);
}

/* An io_uring read request of a tracked thread, as it is submitted: its
 * file, first and last page (see uring_reads). Its position is the one
 * the request gives, or for -1 the file's position now, which the
 * request takes at issue (and moves at completion): with several such
 * requests in flight only the first is right, and the others' last
 * pages then match no batch of theirs, so they are counted as before
 * (by where their first reported batch starts). A provided buffer's
 * length, picked at issue, is taken to be the request's: a shorter one
 * matches nothing either. A registered vector is imported at issue, and
 * so is a vector of provided buffers: READV_FIXED and such a READV are
 * not noted. */
SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(on_uring_submit, struct io_kiocb *req_arg)
{
	struct tstate *t = current_state();
	if (!t)
		return 0;
	struct io_kiocb *req = BTF_VIEW(req_arg, struct io_kiocb);
	__u32 op = req->opcode;
	bool vectored = op == bpf_core_enum_value(enum io_uring_op, IORING_OP_READV);
	if (!vectored && op != bpf_core_enum_value(enum io_uring_op, IORING_OP_READ) &&
	    op != bpf_core_enum_value(enum io_uring_op, IORING_OP_READ_FIXED))
		return 0;
	struct io_rw *rw = bpf_rdonly_cast(req, bpf_core_type_id_kernel(struct io_rw));
	__s64 pos = rw->kiocb.ki_pos;
	__u64 bytes = rw->len;
	if (vectored) {
		/* The vector is imported at preparation, before this, but not
		 * one the kernel picks at issue (provided buffers): that
		 * request's state may hold an earlier request's count. */
		if (req->flags & (1ull << REQ_F_BUFFER_SELECT_BIT))
			return 0;
		struct io_async_rw *io = bpf_rdonly_cast(req->async_data, bpf_core_type_id_kernel(struct io_async_rw));
		bytes = io ? io->iter.count : 0;
	}
	if (!bytes)
		return 0;
	struct file *f = uring_file(req);
	if (!f)
		return 0;
	if (pos == -1)
		pos = BPF_CORE_READ(f, f_pos);
	if (pos < 0)
		return 0;
	struct inode *inode = BPF_CORE_READ(f, f_mapping, host);
	if (!inode)
		return 0;
	struct uring_read_key k = {};
	k.file.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	k.file.gen = BPF_CORE_READ(inode, i_generation);
	k.file.ino = BPF_CORE_READ(inode, i_ino);
	k.last = ((__u64)pos + bytes - 1) >> 12;
	__u64 first = (__u64)pos >> 12;
	if (bpf_map_update_elem(&uring_reads, &k, &first, BPF_ANY) == 0 && !uring_noted)
		uring_noted = 1;
	return 0;
}

SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(on_filemap_fault, struct address_space *mapping_arg, unsigned long index)
{
	struct address_space *mapping = BTF_VIEW(mapping_arg, struct address_space);
	struct tstate *t = current_state();
	if (!t)
		return 0;
	left_entry(t);
	/* The start of a fault that may miss: its readahead comes next. */
	t->fault_ts = bpf_ktime_get_ns();
	t->flags |= TF_FAULT_TS;
	on_access(t, mapping, index, index, t->fault_ts, false);
	seen_in_entry(t);
	return 0;
}

/* The other objects' work on mm_filemap_add_to_page_cache, run by tail
 * call from on_add_to_cache so that the tracepoint carries one program:
 * each program on a tracepoint costs every insertion of the machine its
 * own dispatch and its own "is this thread tracked" lookup. User space
 * puts the programs in (bpf/evict's on_other_insert for threads the run
 * does not track, bpf/download's on_dl_write for those it does); an
 * empty slot ends the chain. */
#define ADD_CHAIN_UNTRACKED 0
#define ADD_CHAIN_TRACKED 1
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} add_chain SEC(".maps");

/* BTF: the folio gives the inode, so a file that is only written (a new
 * cache entry) gets its path too. False when the insertion is a read's
 * (no write syscall, not past the end of the file), true otherwise. */
static __always_inline bool add_to_cache(struct tstate *t, struct folio *folio)
{
	struct inode *inode = folio->mapping->host;
	struct file_key key = {};
	key.dev = inode->i_sb->s_dev;
	key.gen = inode->i_generation;
	key.ino = inode->i_ino;
	struct file_stats *fs = file_get(&key, true);
	if (!fs)
		return true;
	__u32 order = 0;
	if (folio->flags.f & (1ull << bpf_core_enum_value(enum pageflags, PG_head)))
		order = folio->_flags_1 & 0xff;
	__u64 n = 1ull << (order & 31);
	fs->last_tgid = t->tgid;
	long nr = current_syscall(bpf_get_current_task_btf());
	/* Reads never insert pages past the end of the file: those come from
	 * a write that extends it, whatever the syscall (sendfile, splice,
	 * copy_file_range into a file). */
	bool created = writes_files(nr) || folio->index >= (((__u64)inode->i_size + 4095) >> 12);
	send_view(t, btf_addr(inode), 0, &key, fs);
	if (!fs->path_sent) {
		fs->path_sent = 1;
		__u32 kind = created ? PATH_CREATED : PATH_SEEN;
		/* A cold module's first insertion, by the Python process that
		 * reads it: one record is both the file's first sight and the
		 * process's first read, and the read's batches that follow
		 * send none (a second walk and record, and an LRU table
		 * update: 1.25 µs a module of a cold import). */
		if (!created && (t->flags & TF_PYTHON) && (nr == NR_read || nr == NR_pread64 || nr == NR_readv) &&
		    python_file(inode)) {
			fs->py_read_tgid = t->tgid;
			kind = PATH_PY_READ;
		}
		emit_path(t, btf_addr(inode), &key, kind, 0);
	}
	if (created) {
		__sync_fetch_and_add(&fs->created, n);
		return true;
	}
	__sync_fetch_and_add(&fs->missed, n);
	__u64 lo = folio->index, hi = folio->index + n - 1;
	__u64 again = mark_inserted(&key, fs, lo, hi);
	if (again)
		__sync_fetch_and_add(&fs->reread, again);
	if (same_file(&t->ra_file, &key) && lo <= t->ra_hi + 1 && hi + 1 >= t->ra_lo) {
		if (lo < t->ra_lo)
			t->ra_lo = lo;
		if (hi > t->ra_hi)
			t->ra_hi = hi;
	} else {
		t->ra_file = key;
		t->ra_lo = lo;
		t->ra_hi = hi;
	}
	t->cur = key;
	__u64 now = bpf_ktime_get_ns();
	__u64 start = now;
	/* In a fault, the fill began at its filemap_fault, microseconds ago. */
	if (nr < 0 && (t->flags & TF_FAULT_TS) && now >= t->fault_ts && now - t->fault_ts < FAULT_TS_MAX_NS)
		start = t->fault_ts;
	__u64 stack = open_fill(t, start, now);
	if (stack)
		file_stack_add(key_dev_gen(&key), key.ino, stack, FS_MISSED, n);
	note_order(&key, fs, lo, n, nr < 0);
	return false;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_add_to_cache, struct folio *folio_arg)
{
	struct folio *folio = BTF_VIEW(folio_arg, struct folio);
	/* The tracked test first, the only work for most of the machine's
	 * insertions. */
	struct tstate *t = current_state();
	bool written = true;
	if (t) {
		left_entry(t);
		written = add_to_cache(t, folio);
		seen_in_entry(t);
	}
	/* A tracked read's insertion has nothing for the chain: bpf/download
	 * links only what a write inserts (on_dl_write's own test, which
	 * written includes). */
	if (t && !written)
		return 0;
	bpf_tail_call(ctx, &add_chain, t ? ADD_CHAIN_TRACKED : ADD_CHAIN_UNTRACKED);
	return 0;
}

/* Direct I/O.
 *
 * A direct read fills no page cache, so no fill names its file. Its bios
 * are queued by the thread that reads (block_bio_queue runs in the
 * submitter; block_rq_issue often runs in a kworker), and iomap's direct
 * I/O (ext4, xfs, btrfs) hangs the request on the bio: bi_private is its
 * struct iomap_dio, whose kiocb holds the file. bi_private means
 * something else for other bios (a buffer head, a readahead context), so
 * the chain counts only when its end agrees with the bio: a file opened
 * O_DIRECT whose filesystem sits on the bio's device. The entry's I/O
 * waits are then that file's (bpf/sched: wait_cause) until it returns to
 * user space. */
#define O_DIRECT_ 040000 /* x86-64 uapi */
#define REQ_OP_MASK_ 0xff

static __always_inline struct file *dio_file(struct bio *bio)
{
	struct iomap_dio *dio = bpf_rdonly_cast(bio->bi_private, bpf_core_type_id_kernel(struct iomap_dio));
	if (!dio)
		return NULL;
	struct kiocb *iocb = bpf_rdonly_cast(dio->iocb, bpf_core_type_id_kernel(struct kiocb));
	if (!iocb)
		return NULL;
	struct file *f = bpf_rdonly_cast(iocb->ki_filp, bpf_core_type_id_kernel(struct file));
	if (!f || !(f->f_flags & O_DIRECT_) || !f->f_inode)
		return NULL;
	if ((void *)f->f_inode->i_sb->s_bdev != (void *)bio->bi_bdev)
		return NULL;
	return f;
}

/* A block device read with O_DIRECT (block/fops.c, not iomap): the file
 * of the read syscall's descriptor, when it is a block device opened
 * O_DIRECT. Only a device: a filesystem's reads in the same entry may be
 * its metadata. */
#define S_IFMT_ 00170000
#define S_IFBLK_ 0060000

static __always_inline struct file *syscall_dio_file(struct bio *bio)
{
	struct file *fp = syscall_read_file(bpf_get_current_task_btf());
	if (!fp)
		return NULL;
	struct file *f = bpf_rdonly_cast(fp, bpf_core_type_id_kernel(struct file));
	if (!(f->f_flags & O_DIRECT_) || !f->f_inode || (f->f_inode->i_mode & S_IFMT_) != S_IFBLK_)
		return NULL;
	/* The device's own bios, not a stacked device's clones of them. */
	if (f->f_inode->i_rdev != bio->bi_bdev->bd_dev)
		return NULL;
	return f;
}

/* Whether a read bio that names no file carries direct I/O: its first page
 * is neither in a filesystem's or block device's page cache (readahead,
 * metadata through buffer heads) nor in the swap cache (swap-in). User
 * buffers (anonymous or shmem pages) and device memory remain. */
static __always_inline bool direct_pages(struct bio *bio)
{
	struct bio_vec *bv = bpf_rdonly_cast(bio->bi_io_vec, bpf_core_type_id_kernel(struct bio_vec));
	if (!bv || !bv->bv_page)
		return false;
	struct page *pg = bpf_rdonly_cast(bv->bv_page, bpf_core_type_id_kernel(struct page));
	__u64 fl = pg->flags.f;
	__u64 swap = (1ull << bpf_core_enum_value(enum pageflags, PG_swapcache)) |
		     (1ull << bpf_core_enum_value(enum pageflags, PG_swapbacked));
	if ((fl & swap) == swap)
		return false;
	/* A scalar copy: the low bit of an anonymous mapping is a tag. */
	unsigned long m = 0;
	bpf_probe_read_kernel(&m, sizeof(m), &pg->mapping);
	if (!m || (m & 1))
		return true; /* no mapping, or an anonymous one */
	struct address_space *as = bpf_rdonly_cast((void *)m, bpf_core_type_id_kernel(struct address_space));
	struct inode *host = bpf_rdonly_cast(as->host, bpf_core_type_id_kernel(struct inode));
	if (!host)
		return false;
	return (host->i_mode & S_IFMT_) != S_IFBLK_ && !host->i_sb->s_bdev;
}

/* Direct reads no file names (a driver's own, such as GPUDirect Storage,
 * or a filesystem without iomap): counted per process and device, under
 * a key no inode has (UNKNOWN_DIRECT | tgid on the bio's device). Not in
 * an entry whose direct reads a file already named: a stacked device
 * (dm, md) queues its clones of those bios from the same entry. */
#define UNKNOWN_DIRECT (1ull << 63)

static __always_inline bool unknown_direct_key(struct tstate *t, struct bio *bio, struct file_key *key)
{
	if (t->flags & (TF_DIRECT | TF_MISSED) || !direct_pages(bio))
		return false;
	struct block_device *bdev = bpf_rdonly_cast(bio->bi_bdev, bpf_core_type_id_kernel(struct block_device));
	if (!bdev)
		return false;
	key->dev = bdev->bd_dev;
	key->gen = 0;
	key->ino = UNKNOWN_DIRECT | t->tgid;
	return true;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(on_bio_queue, struct bio *bio_arg)
{
	struct bio *bio = BTF_VIEW(bio_arg, struct bio);
	struct tstate *t = current_state();
	if (!t || (bio->bi_opf & REQ_OP_MASK_) != REQ_OP_READ)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	left_entry(t);
	/* An io-wq worker never returns to user space, and its counters do
	 * not move between requests: without task works each bio it queues
	 * that is not a stacked device's clone of another is a request of
	 * its own (its file, or its own unknown-file count). */
	if ((t->flags & TF_LAZY_END) && (task->flags & PF_IO_WORKER_) && !(bio->bi_flags & (1 << BIO_CLONED)))
		t->flags &= ~TF_DIRECT;
	/* A fill's own readahead bios: built after its last insertion, and
	 * a fault's asynchronous readahead returns right after them without
	 * a switch out. Without task works they are the last sight of it. */
	if (t->flags & TF_MISSED)
		seen_in_entry(t);
	struct file *f = dio_file(bio);
	if (!f)
		f = syscall_dio_file(bio);
	struct file_key key = {};
	struct inode *inode = NULL;
	if (f) {
		inode = bpf_rdonly_cast(f->f_inode, bpf_core_type_id_kernel(struct inode));
		key.dev = inode->i_sb->s_dev;
		key.gen = inode->i_generation;
		key.ino = inode->i_ino;
	} else if (!unknown_direct_key(t, bio, &key)) {
		return 0;
	}
	struct file_stats *fs = file_get(&key, true);
	if (!fs)
		return 0;
	__sync_fetch_and_add(&fs->direct_bytes, bio->bi_iter.bi_size);
	fs->last_tgid = t->tgid;
	if (inode)
		send_view(t, btf_addr(inode), file_path(btf_addr(f)), &key, fs);
	if (!fs->path_sent) {
		fs->path_sent = 1;
		if (inode)
			emit_path(t, btf_addr(inode), &key, PATH_SEEN, 0);
	}
	t->dio_file = key;
	if (close_at_return(t))
		t->flags |= TF_DIRECT;
	seen_in_entry(t);
	/* The process's latest direct read, for its io_uring waits: a pid
	 * lookup, made only for a direct read's bio. */
	struct tstate *ls = leader_state(task->tgid);
	if (ls) {
		ls->async_file = key;
		ls->async_ts = bpf_ktime_get_ns();
	}
	return 0;
}

/* Where task works are refused, the exits of the syscalls that copy
 * file pages to user space end their fill: a read's copy of its last
 * pages comes after its last page-cache event, and with large folios
 * that is most of a cold read's CPU (measured without these: 6 ms of
 * fill CPU for a 140 ms cold read of 256 MiB). User space attaches this
 * program to each such syscall's exit, only then, and only once the
 * first fill must end lazily (wake_lazy): an attached syscall
 * tracepoint puts every task of the machine on the syscall slow path.
 * These per-syscall events, not the raw sys_exit tracepoint: the raw one
 * ran a program at every syscall exit of the machine (untraced getppid
 * 165 -> 270 ns a call, against 220 with these), though it detaches at
 * once and these take an RCU grace period each. */
SEC("tracepoint/syscalls/sys_exit_read")
int on_read_exit(void *ctx)
{
	struct tstate *t = current_state();
	if (!t || !(t->flags & TF_LAZY_END))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	/* An earlier syscall's fill, returned since: it ends where it was
	 * last seen. */
	if (t->flags & TF_RETURNING)
		left_entry(t);
	if (!(t->flags & TF_LAZY_END))
		return 0;
	/* This syscall's: charged up to now; the entry, as its counters read
	 * now, lasts until the thread is back in user space. */
	__u64 now = bpf_ktime_get_ns();
	if (t->flags & TF_MISSED)
		charge_miss(t, NULL, now);
	t->entry = entry_of(task);
	t->seen_ts = now;
	t->flags |= TF_RETURNING;
	/* A fill that switched out ends at its return anyway: only the
	 * others keep the exits on. */
	if (!(t->flags & TF_RSEQ_END))
		note_lazy_seen(now);
	return 0;
}

/* Where task works are refused, the return to user space of a kernel
 * entry in which a thread with an rseq area switched out while its fill
 * was open (bpf/sched: on_switch arms TF_RSEQ_END): the switch set the
 * thread's rseq notification, which the kernel handles on that very
 * return, before any user instruction, and reports here. The fill ends
 * now, as a task work would end it, copy of its last pages included,
 * and no syscall tracepoint is needed. A tracepoint that is not a
 * syscall's: other processes pay this program (the tracked test) at
 * their returns after a switch, not the slow path at every syscall.
 * Attached once the first such fill asks (RSEQ_BIT), and off again after
 * a quiet spell (rseq_seen_ns). */
SEC("tp_btf/rseq_update")
int BPF_PROG(on_rseq_return, struct task_struct *task)
{
	struct tstate *t = current_state();
	if (!t || (t->flags & (TF_LAZY_END | TF_RSEQ_END)) != (TF_LAZY_END | TF_RSEQ_END))
		return 0;
	end_fill(t, NULL, bpf_ktime_get_ns());
	__sync_fetch_and_add(&rseq_ended, 1);
	return 0;
}

/* Loaded alone, with task_works set, before the object: whether this
 * kernel lets a tracing program schedule a task work. Never attached. */
static int probe_cb(struct bpf_map *map, void *key, void *value)
{
	return 0;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(probe_task_work, struct folio *folio)
{
	__u32 slot = 0;
	struct fill_end *fe = bpf_map_lookup_elem(&fill_ends, &slot);
	if (task_works && fe && bpf_core_type_exists(struct task_struct))
		bpf_task_work_schedule_resume_impl(bpf_get_current_task_btf(), &fe->tw, &fill_ends, probe_cb, NULL);
	return 0;
}

BTF_ANCHOR(enum path_kind, path_kind);
