//go:build ignore

/* coldtrace's JIT and kernel-cache probes: the path syscalls of tracked
 * threads (opens, failed lookups, mkdir, rename, unlink, chdir), their
 * execs with argv and environment, new processes, and uprobes on compile
 * entry points. Every event is rare next to the core's page-cache traffic
 * and goes through this object's ring buffer; user space decides which
 * paths belong to a cache.
 *
 * The task_states and threads maps (the tracked set) are the core
 * object's, given at load time as map replacements; drops are counted in
 * this object's own lost counters, which user space adds to the record's.
 * Tracepoints and uprobes only: kprobes and fentry are not available. */

#include "pywalk.h"
#include "syscall64.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* PATH_MAX: a path syscall refuses a longer path (ENAMETOOLONG), so a
 * successful one's path always fits whole. */
#define PATH_LEN 4096
/* The executed file's path (bprm->filename): the kernel took it whole,
 * up to PATH_MAX, so it fits whole. */
#define FILENAME_LEN PATH_LEN
#define ENV_LEN 12288

/* The first field of every record: which struct it is. Exported to Go
 * by bpf2go. */
enum jit_event_kind {
	JE_FILE = 1,
	JE_EXEC = 2,
	JE_FORK = 3,
	JE_UPROBE = 4,
};

/* A path syscall between its entry and its exit; nr is -1 when none is. */
struct pending {
	__s32 nr;
	__u32 pad;
	__u64 args[5];
};

/* One path syscall of a tracked thread. path holds len1 bytes of the
 * first path (NUL included) and then len2 bytes of the second (rename);
 * the record is cut after them. A path longer than PATH_LEN - 1 bytes
 * (a syscall that failed with ENAMETOOLONG) is cut, and cut says which:
 * bit 0 the first, bit 1 the second. */
struct file_event {
	__u32 kind;
	__u32 pid;
	__u32 tid;
	__s32 nr;     /* syscall number */
	__u64 ts;     /* CLOCK_MONOTONIC ns at the syscall's exit */
	__u64 cpu_ns; /* the thread's on-CPU time so far */
	__s64 ret;
	__s32 dfd1;   /* dirfd of the first path, or AT_FDCWD */
	__s32 dfd2;
	__u32 flags;  /* open flags, rename flags, statx/at flags */
	__u32 mode;
	__u32 len1;
	__u32 len2;
	__u32 cut;
	__u32 pad;
	/* The Python stack of the looking-up thread (bpf/include/pywalk.h),
	 * 0 for none or a thread that is not Python. */
	__u64 stack;
	char path[2 * PATH_LEN];
};

/* A tracked thread exec'd: its program and the environment as the new
 * image sees them (what decides its cache paths), packed: data holds the
 * program's name (filename_len bytes with its NUL), then env_len bytes
 * of the environment, and the record ends there. A burst of 600 execs
 * of a fixed 5 KiB more each overran the 2 MiB ring beside a busy
 * loop. */
struct exec_event {
	__u32 kind;
	__u32 pid;
	__u32 tid;
	__u32 ppid;
	__u64 ts;
	__u32 uid;
	__u32 gid;
	__u32 filename_len;
	__u32 env_len;
	__u32 env_truncated; /* the environment was longer than ENV_LEN */
	__u32 pad;
	__u64 gen;           /* the process's new generation (see quiet_open) */
	__u64 ino;           /* the program's inode, device (the kernel's */
	__u32 dev;           /* numbering) and the environment's whole size: */
	__u32 env_size;      /* the image's key in known_execs */
	char data[FILENAME_LEN + ENV_LEN];
};

/* A tracked process forked a new process (not a thread). */
struct fork_event {
	__u32 kind;
	__u32 pid;
	__u32 ppid;
	__u32 pad;
	__u64 ts;
	__u64 gen; /* the new process's generation (see quiet_open) */
};

/* One return from a uprobed function; cookie is the probe's index. */
struct uprobe_event {
	__u32 kind;
	__u32 pid;
	__u32 tid;
	__u32 pad;
	__u64 cookie;
	__u64 start;
	__u64 end;
	__u64 cpu_ns; /* the thread's on-CPU time inside the call */
	__u64 stack;  /* the calling thread's Python stack at the entry, 0: none */
};

struct ucall_key {
	__u32 tid;
	__u32 pad;
	__u64 cookie;
};

struct ucall {
	__u64 start;
	__u64 cpu_ns;
	__u64 stack;
};

/* A ring buffer's pages are all mapped into coldtrace when its reader
 * opens it, twice over (the data is mapped again after itself): its size
 * counts twice in coldtrace's RSS from the start. 8 MiB made 16 MiB of
 * it; plain opens stay in the kernel now (quiet_open), and 2 MiB holds
 * some 150 exec records between two reads. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 2 << 20);
} jit_events SEC(".maps");

/* Task storage: no hash of the tid on each of the 36 path-syscall
 * tracepoints, and an untracked thread is turned away by one load. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pending);
} pending SEC(".maps");

/* Timed library calls in progress, by thread and probe: an entry lives
 * from a call to its return. 4,096 threads inside timed compile calls at
 * once is more than any program runs; a preallocated LRU table of
 * MAX_THREADS entries was 6.8 MB of kernel memory to set up at each
 * start. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ucall_key);
	__type(value, struct ucall);
} ucalls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct file_event);
} file_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_event);
} exec_scratch SEC(".maps");

BTF_ANCHOR(enum jit_event_kind, jit_event_kind);
BTF_ANCHOR(struct fork_event, fork_event);
BTF_ANCHOR(struct uprobe_event, uprobe_event);

/* Waking the reader for each record costs more than the record: file
 * events wake it only every WAKE_NS or once WAKE_BYTES are waiting; it
 * also polls on its own. Uprobe records wake it as usual. Exec and fork
 * records wake it at that pace only where acting on them soon matters
 * (exec_wake, fork_wake): a wake every 10 ms made a 2,000-process
 * fork/exec storm 5% slower, by the reader's threads waking beside it. */
#define WAKE_NS (10 * 1000 * 1000)
#define WAKE_BYTES (256 * 1024)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last_wake SEC(".maps");

/* Processes a table keyed by process holds at most. */
#define MAX_VERDICT_PROCS 16384

/* An exec's image: its program and the size of its environment. */
struct image_key {
	__u64 ino;
	__u32 dev;
	__u32 env_size;
};

/* Images user space has acted on and found nothing to do at once for
 * (the KNOWN_ bits below): their next execs wake no reader. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct image_key);
	__type(value, __u32);
} known_execs SEC(".maps");

/* Processes with uprobe links, written by user space: their children
 * need links of their own soon (they inherit the breakpoints, not the
 * links), so their forks wake the reader. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_VERDICT_PROCS);
	__type(key, __u32);
	__type(value, __u8);
} linked_procs SEC(".maps");

/* The bits of a known image, each written by the user-space part that
 * decides it. */
enum known_bit {
	KNOWN_NO_FRAMEWORK = 1,  /* no framework named or set in the environment */
	KNOWN_QUIET_PROGRAM = 2, /* a program that calls no gated function */
	KNOWN_ALL = 3,
};
BTF_ANCHOR(enum known_bit, known_bit);

/* The room an exec record gives the program's name with its NUL: a name
 * that fills it may be cut. */
enum exec_limit {
	EXEC_NAME_MAX = FILENAME_LEN,
};
BTF_ANCHOR(enum exec_limit, exec_limit);

/* Set by user space while the path-syscall probes are on: every exec and
 * fork wakes the reader at WAKE_NS's pace, as a new process's opens wait
 * on a verdict user space writes once it has read the record. */
__u32 prompt_all = 0;

BTF_ANCHOR(struct image_key, image_key);

static __always_inline __u64 wake_flags(__u64 now)
{
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&last_wake, &zero);
	if (!last)
		return 0;
	if (now - *last >= WAKE_NS || bpf_ringbuf_query(&jit_events, BPF_RB_AVAIL_DATA) >= WAKE_BYTES) {
		*last = now;
		return BPF_RB_FORCE_WAKEUP;
	}
	return BPF_RB_NO_WAKEUP;
}

/* Only a full ring wakes the reader for a record nothing waits on. */
static __always_inline __u64 lazy_flags(void)
{
	if (bpf_ringbuf_query(&jit_events, BPF_RB_AVAIL_DATA) >= WAKE_BYTES)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

static __always_inline __u64 exec_wake(struct exec_event *ev)
{
	if (prompt_all)
		return wake_flags(ev->ts);
	struct image_key k = {.ino = ev->ino, .dev = ev->dev, .env_size = ev->env_size};
	__u32 *known = bpf_map_lookup_elem(&known_execs, &k);
	if (known && (*known & KNOWN_ALL) == KNOWN_ALL)
		return lazy_flags();
	return wake_flags(ev->ts);
}

static __always_inline __u64 fork_wake(__u32 parent, __u64 now)
{
	if (prompt_all || bpf_map_lookup_elem(&linked_procs, &parent))
		return wake_flags(now);
	return lazy_flags();
}

/* Read-only opens that succeed are most of a Python program's path
 * syscalls (modules, data files), and user space handled each one for
 * some 7 µs (a 20,000-file loop took 1.7× as long traced). Most are
 * outside every cache root and tell user space nothing but a file
 * descriptor it can read from /proc when it needs one. quiet_open drops
 * them here, after the path copy (about 60 ns for a typical path) and
 * before the ring buffer, when all of these hold:
 *  - user space has resolved the process's roots: proc_verdicts holds
 *    the generation proc_gen gave it at its last exec or fork (a new
 *    environment may name new roots; until user space has put them in
 *    root_prefixes, everything goes through);
 *  - the path is absolute (relative paths depend on the cwd: they all go
 *    through) and clean (no "//", "." or ".." component, which user
 *    space would clean before matching);
 *  - no prefix in root_prefixes (every fixed root of any process, with
 *    its trailing '/') starts it;
 *  - none of its components hashes to an in-tree cache's directory name
 *    (anywhere_hash: "__pycache__", "models"), and its base name has no
 *    ".so" (libraries bring uprobes and mark frameworks in use).
 * Failed opens, writes, creations, directories, stats, mkdir and rename
 * always go through: misses and fills are never decided here. */
#define PREFIX_LEN 128
#define SCAN_LEN 256
#define MAX_ANYWHERE 4
#define O_ACCMODE_ 00000003
#define O_DIRECTORY_ 00200000
#define O_PATH_ 010000000
#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

struct root_prefix {
	__u32 prefixlen; /* in bits */
	__u8 data[PREFIX_LEN];
};

struct proc_verdict {
	__u64 gen;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct root_prefix);
	__type(value, __u8);
} root_prefixes SEC(".maps");

/* Processes proc_gen and proc_verdicts keep, the most recently seen: a
 * process whose entry went sends every open to user space (no verdict,
 * no quiet open), which only costs it. Preallocated LRU tables of
 * MAX_THREADS entries each were 10 MB of kernel memory to set up at
 * each start. */

/* The generation of each traced process: a fresh number at each exec
 * and fork, so that a verdict user space wrote for the process's
 * previous image (or for an earlier process with the same pid) is void. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_VERDICT_PROCS);
	__type(key, __u32);
	__type(value, __u64);
} proc_gen SEC(".maps");

/* Written by user space once a generation's roots are in root_prefixes. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_VERDICT_PROCS);
	__type(key, __u32);
	__type(value, struct proc_verdict);
} proc_verdicts SEC(".maps");

/* FNV-1a hashes of the in-tree caches' directory names, set at load. */
const volatile __u64 anywhere_hash[MAX_ANYWHERE] = {};
const volatile __u32 anywhere_count = 0;

__u64 gen_seq = 0;

BTF_ANCHOR(struct root_prefix, root_prefix);
BTF_ANCHOR(struct proc_verdict, proc_verdict);

static __always_inline __u64 new_gen(__u32 tgid)
{
	__u64 g = __sync_fetch_and_add(&gen_seq, 1) + 1;
	bpf_map_update_elem(&proc_gen, &tgid, &g, BPF_ANY);
	return g;
}

static __always_inline bool anywhere_name(__u64 h)
{
	for (int i = 0; i < MAX_ANYWHERE; i++) {
		if (i >= anywhere_count)
			break;
		if (anywhere_hash[i] == h)
			return true;
	}
	return false;
}

/* The state of one pass over a path, for bpf_loop (a plain loop made
 * the verifier walk every combination of its counters). The counters
 * live in a per-CPU map, not in the loop's context on the stack: read
 * back from a map they are any number to the verifier, so the loop's
 * states agree after a step or two; on the stack every step was checked
 * again with their ranges one wider (most of on_path_exit's 50 ms of
 * verification). */
struct scan_state {
	__u64 h;
	__u32 clen;
	__u32 dots;
	__u32 so;
	char c1, c2;
	bool pass; /* the path must reach user space */
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scan_state);
} scan_scratch SEC(".maps");

struct scan {
	const char *path;
	__u32 n;
	__u32 pad;
	struct scan_state *st;
};

static long scan_byte(__u64 i, void *arg)
{
	struct scan *s = arg;
	struct scan_state *st = s->st;
	if (i == 0)
		return 0; /* the leading '/' */
	if (i >= s->n)
		return 1;
	char c = s->path[i & (SCAN_LEN - 1)];
	if (c == '/' || c == 0) {
		/* "//", "/./" or "/../": not clean; or an in-tree cache's name */
		if (st->clen == 0 || st->clen == st->dots || anywhere_name(st->h)) {
			st->pass = true;
			return 1;
		}
		if (c == 0)
			return 1;
		st->h = FNV_OFFSET;
		st->clen = st->dots = st->so = 0;
		st->c1 = st->c2 = 0;
		return 0;
	}
	st->h = (st->h ^ (__u8)c) * FNV_PRIME;
	st->clen++;
	if (c == '.' && st->clen == st->dots + 1)
		st->dots++;
	if (st->c2 == '.' && st->c1 == 's' && c == 'o')
		st->so = 1;
	st->c2 = st->c1;
	st->c1 = c;
	return 0;
}

/* scan_path runs scan_byte over the n bytes at path; NULL when the CPU's
 * scratch is missing. */
static __always_inline struct scan_state *scan_path(const char *path, __u32 n)
{
	__u32 zero = 0;
	struct scan_state *st = bpf_map_lookup_elem(&scan_scratch, &zero);
	if (!st)
		return NULL;
	__builtin_memset(st, 0, sizeof(*st));
	st->h = FNV_OFFSET;
	struct scan s = {.path = path, .n = n, .st = st};
	bpf_loop(SCAN_LEN, scan_byte, &s, 0);
	return st;
}

/* quiet_open says whether the successful read-only open whose path is in
 * ev->path (n bytes, NUL included) can stay in the kernel. */
static __always_inline bool quiet_open(struct file_event *ev, long n, __u32 tgid)
{
	if (n < 2 || n > SCAN_LEN || ev->path[0] != '/')
		return false;
	__u64 *g = bpf_map_lookup_elem(&proc_gen, &tgid);
	struct proc_verdict *v = bpf_map_lookup_elem(&proc_verdicts, &tgid);
	if (!g || !v || v->gen != *g)
		return false;
	/* One pass over the path: components, their hashes, ".so". */
	struct scan_state *st = scan_path(ev->path, n);
	if (!st || st->pass || st->so)
		return false;
	struct root_prefix key = {};
	__u32 len = n - 1;
	if (len > PREFIX_LEN)
		len = PREFIX_LEN;
	key.prefixlen = len * 8;
	__builtin_memcpy(key.data, ev->path, PREFIX_LEN);
	return !bpf_map_lookup_elem(&root_prefixes, &key);
}

/* Whether the user string at p has a byte past the PATH_LEN - 1 that a
 * full copy holds: a buffer filled exactly is told from a cut. */
static __always_inline bool path_goes_on(const char *p)
{
	char c = 0;
	return bpf_probe_read_user(&c, 1, p + PATH_LEN - 1) == 0 && c != 0;
}

/* Whether the name ending at buf[end] (its NUL) is Python bytecode: a
 * .pyc, or the temp name importlib writes it under ("X.pyc.123456").
 * Every import looks one up: their stacks, a new one per import, would
 * fill the stack table and cost a walk each, for a cache the page-cache
 * probes already tell. */
#define PYC_TAIL 32

struct tail {
	char t[PYC_TAIL];
	__u32 len; /* the name's bytes in t */
	bool found;
};

/* One byte of the tail per call, by bpf_loop: an unrolled loop made
 * the path programs' load some 30 ms longer. */
static long pyc_byte(__u64 k, void *arg)
{
	struct tail *tl = arg;
	if (k >= tl->len)
		return 1;
	char c = tl->t[k & (PYC_TAIL - 1)];
	if (c == '/') {
		tl->found = false; /* only the last component counts */
		return 0;
	}
	if (c == '.' && k + 4 <= tl->len && tl->t[(k + 1) & (PYC_TAIL - 1)] == 'p' &&
	    tl->t[(k + 2) & (PYC_TAIL - 1)] == 'y' && tl->t[(k + 3) & (PYC_TAIL - 1)] == 'c')
		tl->found = true;
	return 0;
}

static __always_inline bool pyc_name(const char *buf, __u32 end)
{
	struct tail tl = {};
	__u32 start = end > PYC_TAIL ? end - PYC_TAIL : 0;
	if (start > 2 * PATH_LEN - PYC_TAIL)
		return false;
	if (bpf_probe_read_kernel(tl.t, sizeof(tl.t), buf + start))
		return false;
	tl.len = end - start;
	bpf_loop(PYC_TAIL, pyc_byte, &tl, 0);
	return tl.found;
}

/* stack_wanted says whether a Python thread's path event in ev (its
 * paths n1 and n2 bytes long, NULs included) may concern a cache, and
 * so takes the thread's stack: its path (a rename's new name) is
 * absolute and under a root user space put in root_prefixes, or has a
 * component named like an in-tree cache (anywhere_hash), and it is not
 * bytecode. A Python program fails hundreds of lookups outside every
 * cache (imports, library searches): a walk each would cost more than
 * the events. Global: verified once, not on every path of its caller
 * (as a static function it made the path programs' load 16 ms longer). */
__noinline int stack_wanted(struct file_event *ev, long n1, long n2)
{
	if (!ev)
		return 0;
	__u32 off = 0;
	long n = n1;
	if (n2 > 0) {
		if (n1 <= 0 || n1 >= PATH_LEN)
			return 0;
		off = n1 & (PATH_LEN - 1);
		n = n2;
	}
	if (n < 2 || n > PATH_LEN)
		return 0;
	const char *p = ev->path + off;
	if (p[0] != '/' || pyc_name(ev->path, off + n - 1))
		return 0;
	struct root_prefix key = {};
	__u32 len = n - 1;
	if (len > PREFIX_LEN)
		len = PREFIX_LEN;
	key.prefixlen = len * 8;
	if (bpf_probe_read_kernel(key.data, PREFIX_LEN, p))
		return 0;
	if (bpf_map_lookup_elem(&root_prefixes, &key))
		return 1;
	if (n > SCAN_LEN)
		return 0;
	struct scan_state *st = scan_path(p, n);
	return st && st->pass;
}

/* A program may read no further into its context than the smallest
 * record of the tracepoints it is attached to, so there is one entry
 * program per argument count. */
static __always_inline int path_enter(struct syscall_trace_enter *ctx, int nargs)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (!current_state())
		return 0;
	struct pending *p = bpf_task_storage_get(&pending, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p)
		return 0;
	p->nr = ctx->nr;
	p->args[0] = ctx->args[0];
	if (nargs > 1)
		p->args[1] = ctx->args[1];
	if (nargs > 2)
		p->args[2] = ctx->args[2];
	if (nargs > 3)
		p->args[3] = ctx->args[3];
	if (nargs > 4)
		p->args[4] = ctx->args[4];
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_chdir")
int on_path_enter1(struct syscall_trace_enter *ctx) { return path_enter(ctx, 1); }

SEC("tracepoint/syscalls/sys_enter_mkdir")
int on_path_enter2(struct syscall_trace_enter *ctx) { return path_enter(ctx, 2); }

SEC("tracepoint/syscalls/sys_enter_open")
int on_path_enter3(struct syscall_trace_enter *ctx) { return path_enter(ctx, 3); }

SEC("tracepoint/syscalls/sys_enter_openat")
int on_path_enter4(struct syscall_trace_enter *ctx) { return path_enter(ctx, 4); }

SEC("tracepoint/syscalls/sys_enter_renameat2")
int on_path_enter5(struct syscall_trace_enter *ctx) { return path_enter(ctx, 5); }

static __always_inline bool is_stat(__s32 nr)
{
	return nr == NR_stat || nr == NR_lstat || nr == NR_newfstatat || nr == NR_statx ||
	       nr == NR_access || nr == NR_faccessat || nr == NR_faccessat2;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int on_path_exit(struct syscall_trace_exit *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (!maybe_tracked(task->tgid))
		return 0;
	struct pending *p = bpf_task_storage_get(&pending, task, 0, 0);
	if (!p || p->nr != ctx->nr) {
		if (p)
			p->nr = -1;
		return 0;
	}
	/* Read in place, not copied: the copy on the stack put this
	 * program's chain down to the Python walk over the verifier's 512
	 * bytes. The arguments stay until the thread's next path syscall. */
	long nr = p->nr;
	struct pending *a = p;
	p->nr = -1;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__s64 ret = ctx->ret;
	/* A lookup that found its path tells nothing an open would not:
	 * only failed stat/access calls go to user space. */
	if (is_stat(nr) && ret == 0)
		return 0;
	struct tstate *s = task_state(task);
	if (!s)
		return 0;
	struct thread *t = slot_thread(s);

	__u32 zero = 0;
	struct file_event *ev = bpf_map_lookup_elem(&file_scratch, &zero);
	if (!ev)
		return 0;
	const char *p1 = 0, *p2 = 0;
	__s32 d1 = AT_FDCWD_, d2 = AT_FDCWD_;
	__u32 flags = 0, mode = 0;
	switch (nr) {
	case NR_open:
		p1 = (const char *)a->args[0];
		flags = a->args[1];
		mode = a->args[2];
		break;
	case NR_creat:
		p1 = (const char *)a->args[0];
		flags = O_CREAT_ | O_WRONLY_ | O_TRUNC_;
		mode = a->args[1];
		break;
	case NR_openat:
		d1 = a->args[0];
		p1 = (const char *)a->args[1];
		flags = a->args[2];
		mode = a->args[3];
		break;
	case NR_openat2: {
		d1 = a->args[0];
		p1 = (const char *)a->args[1];
		struct open_how how = {};
		bpf_probe_read_user(&how, sizeof(how), (void *)a->args[2]);
		flags = how.flags;
		mode = how.mode;
		break;
	}
	case NR_stat:
	case NR_lstat:
	case NR_access:
	case NR_mkdir:
	case NR_unlink:
	case NR_chdir:
		p1 = (const char *)a->args[0];
		mode = a->args[1];
		break;
	case NR_fchdir:
		d1 = a->args[0];
		break;
	case NR_newfstatat:
	case NR_statx:
	case NR_faccessat:
	case NR_faccessat2:
	case NR_mkdirat:
	case NR_unlinkat:
		d1 = a->args[0];
		p1 = (const char *)a->args[1];
		flags = a->args[2];
		if (nr == NR_newfstatat || nr == NR_faccessat2)
			flags = a->args[3];
		break;
	case NR_rename:
		p1 = (const char *)a->args[0];
		p2 = (const char *)a->args[1];
		break;
	case NR_renameat:
	case NR_renameat2:
		d1 = a->args[0];
		p1 = (const char *)a->args[1];
		d2 = a->args[2];
		p2 = (const char *)a->args[3];
		if (nr == NR_renameat2)
			flags = a->args[4];
		break;
	default:
		return 0;
	}

	__u64 now = bpf_ktime_get_ns();
	ev->kind = JE_FILE;
	ev->pid = id >> 32;
	ev->tid = tid;
	ev->nr = nr;
	ev->ts = now;
	ev->cpu_ns = thread_cpu(t, now);
	ev->ret = ret;
	ev->dfd1 = d1;
	ev->dfd2 = d2;
	ev->flags = flags;
	ev->mode = mode;
	ev->len1 = 0;
	ev->len2 = 0;
	/* Read the paths at the exit: the kernel has copied them, so their
	 * pages are present. */
	long n1 = 0, n2 = 0;
	__u32 cut = 0;
	if (p1) {
		n1 = bpf_probe_read_user_str(ev->path, PATH_LEN, p1);
		if (n1 < 0)
			n1 = 0;
		if (n1 > PATH_LEN)
			n1 = PATH_LEN;
		if (n1 == PATH_LEN && path_goes_on(p1))
			cut |= 1;
	}
	if (p2) {
		n2 = bpf_probe_read_user_str(ev->path + n1, PATH_LEN, p2);
		if (n2 < 0)
			n2 = 0;
		if (n2 > PATH_LEN)
			n2 = PATH_LEN;
		if (n2 == PATH_LEN && path_goes_on(p2))
			cut |= 2;
	}
	ev->cut = cut;
	ev->pad = 0;
	ev->len1 = n1;
	ev->len2 = n2;
	if ((nr == NR_openat || nr == NR_open || nr == NR_openat2) && ret >= 0 &&
	    !(flags & (O_ACCMODE_ | O_CREAT_ | O_TRUNC_ | O_DIRECTORY_ | O_PATH_)) && quiet_open(ev, n1, id >> 32))
		return 0;
	/* A lookup, fill or failure in a cache carries the Python stack
	 * that made it (reused without a walk while the thread's two
	 * innermost frames are unchanged). */
	ev->stack = 0;
	if ((s->flags & TF_PYTHON) && py_stacks_on && nr != NR_chdir && nr != NR_fchdir && stack_wanted(ev, n1, n2)) {
		py_stack_current();
		ev->stack = s->py_last;
	}
	__u64 size = offsetof(struct file_event, path) + n1 + n2;
	if (size > sizeof(*ev))
		size = sizeof(*ev);
	if (bpf_ringbuf_output(&jit_events, ev, size, wake_flags(now)))
		count_lost(LOST_RINGBUF);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_jit_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	if (!task_state(p))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	__u32 zero = 0;
	struct exec_event *ev = bpf_map_lookup_elem(&exec_scratch, &zero);
	if (!ev)
		return 0;
	__u64 ug = bpf_get_current_uid_gid();
	ev->kind = JE_EXEC;
	ev->pid = BPF_CORE_READ(p, tgid);
	ev->tid = tid;
	ev->ppid = BPF_CORE_READ(p, real_parent, tgid);
	ev->ts = bpf_ktime_get_ns();
	ev->uid = (__u32)ug;
	ev->gid = ug >> 32;
	ev->pad = 0;
	ev->gen = new_gen(ev->pid);
	long fl = bpf_probe_read_kernel_str(ev->data, FILENAME_LEN, BPF_CORE_READ(bprm, filename));
	if (fl < 1) {
		ev->data[0] = 0;
		fl = 1;
	}
	if (fl > FILENAME_LEN)
		fl = FILENAME_LEN;
	ev->filename_len = fl;

	struct mm_struct *mm = BPF_CORE_READ(p, mm);
	__u64 es = BPF_CORE_READ(mm, env_start), ee = BPF_CORE_READ(mm, env_end);
	__u64 m = ee > es ? ee - es : 0;
	ev->env_truncated = 0;
	if (m > ENV_LEN) {
		m = ENV_LEN;
		ev->env_truncated = 1;
	}
	if (m && bpf_probe_read_user(ev->data + fl, m, (void *)es)) {
		m = 0;
		ev->env_truncated = 1;
	}
	ev->env_len = m;
	ev->env_size = ee > es ? ee - es : 0;
	struct inode *ino = BPF_CORE_READ(bprm, file, f_inode);
	ev->ino = BPF_CORE_READ(ino, i_ino);
	ev->dev = BPF_CORE_READ(ino, i_sb, s_dev);
	__u64 size = offsetof(struct exec_event, data) + fl + m;
	if (size > sizeof(*ev))
		size = sizeof(*ev);
	if (bpf_ringbuf_output(&jit_events, ev, size, exec_wake(ev)))
		count_lost(LOST_RINGBUF);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_jit_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!task_state(parent))
		return 0;
	__u32 ctid = BPF_CORE_READ(child, pid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ctid != ctgid)
		return 0; /* a thread: it shares its process's files and cwd */
	struct fork_event *ev = bpf_ringbuf_reserve(&jit_events, sizeof(*ev), 0);
	if (!ev) {
		count_lost(LOST_RINGBUF);
		return 0;
	}
	ev->kind = JE_FORK;
	ev->pid = ctgid;
	ev->ppid = BPF_CORE_READ(parent, tgid);
	ev->pad = 0;
	ev->ts = bpf_ktime_get_ns();
	ev->gen = new_gen(ctgid);
	bpf_ringbuf_submit(ev, fork_wake(ev->ppid, ev->ts));
	return 0;
}

SEC("uprobe")
int on_uprobe_entry(struct pt_regs *ctx)
{
	struct tstate *s = current_state();
	if (!s)
		return 0;
	struct thread *t = slot_thread(s);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();
	struct ucall_key k = {.tid = tid, .cookie = bpf_get_attach_cookie(ctx)};
	struct ucall c = {.start = now, .cpu_ns = thread_cpu(t, now)};
	/* The call's Python stack: the line whose call compiled. */
	if ((s->flags & TF_PYTHON) && py_stacks_on) {
		py_stack_current();
		c.stack = s->py_last;
	}
	bpf_map_update_elem(&ucalls, &k, &c, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int on_uprobe_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ucall_key k = {.tid = tid, .cookie = bpf_get_attach_cookie(ctx)};
	struct ucall *c = bpf_map_lookup_elem(&ucalls, &k);
	if (!c)
		return 0;
	struct ucall call = *c;
	bpf_map_delete_elem(&ucalls, &k);
	struct tstate *s = current_state();
	if (!s)
		return 0;
	struct thread *t = slot_thread(s);
	__u64 now = bpf_ktime_get_ns();
	struct uprobe_event *ev = bpf_ringbuf_reserve(&jit_events, sizeof(*ev), 0);
	if (!ev) {
		count_lost(LOST_RINGBUF);
		return 0;
	}
	__u64 cpu = thread_cpu(t, now);
	ev->kind = JE_UPROBE;
	ev->pid = id >> 32;
	ev->tid = tid;
	ev->pad = 0;
	ev->cookie = k.cookie;
	ev->start = call.start;
	ev->end = now;
	ev->cpu_ns = cpu > call.cpu_ns ? cpu - call.cpu_ns : 0;
	ev->stack = call.stack;
	bpf_ringbuf_submit(ev, 0);
	return 0;
}
