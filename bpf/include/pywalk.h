/* The CPython frame walker, shared by every object that takes Python
 * stacks. An object includes this header and calls py_stack_here() in the
 * thread whose stack it wants (a fork in the parent, a page-cache fill in
 * the filling thread): it returns the id (hash) of the stack, stored once
 * in py_stacks, or 0 when the process is not a located Python or the walk
 * found no frame. py_confs, py_stacks, py_events and py_lost are created
 * by bpf/pystack; other objects take them through map replacement, as
 * they take the scheduler's task_states.
 *
 * A frame's key is what user space checks a decoded code object against:
 * code objects are freed and their addresses reused, so the address alone
 * could name a function that is not running. The key is the code
 * object's address, its co_firstlineno, the addresses of its co_qualname
 * and co_filename, and a tag of the qualname string's length and hash
 * (the next function's name may take the freed name's address too). The
 * stack id mixes all of it: a stack of reused addresses running other
 * functions is another stack, never the old one's decoded names. */
#pragma once

#include "common.h"

#define PY_MAX_FRAMES 128
/* Past PY_MAX_FRAMES the walk goes on to PY_WALK_LIMIT frames (above
 * CPython's default recursion limit), keeping the PY_KEEP_INNER innermost
 * and, in a ring over the other slots, the outermost: user space shows
 * the 64 innermost and 16 outermost with the gap marked, so the line in
 * main.py that started a deep chain still shows. */
#define PY_WALK_LIMIT 1024
#define PY_KEEP_INNER 64
#define PY_MAX_THREADS 64
#define PY_NONE 0xffffffffu
/* Frames owned by the C stack (3.12, 3.13: 3) or by the interpreter or
 * the C stack (3.14: 3, 4) are shims and entry frames, not code. */
#define PY_OWNED_BY_CSTACK 3
/* 3.14's f_executable is a _PyStackRef: a PyObject pointer whose low bit
 * tags a deferred reference. Earlier minors hold an aligned pointer, so
 * masking the low bits is right for all. */
#define PY_REF_TAG_BITS 7ULL
/* PyASCIIObject's length, followed by its hash: at 16 in every minor
 * walked (3.11-3.14, default builds; free-threaded ones are not walked). */
#define PY_STR_LEN 16

/* Where the walker finds things in one process's interpreter: user space
 * fills it from its offset tables (3.11, 3.12) or the interpreter's own
 * _Py_DebugOffsets (3.13, 3.14). Offsets are bytes into the named struct;
 * PY_NONE where the minor has no such field. */
struct py_conf {
	__u64 runtime;   /* address of _PyRuntime */
	__u64 code_type; /* address of PyCode_Type: a frame's code object must have it */
	__u32 interp_head;  /* _PyRuntimeState.interpreters.head */
	__u32 threads_head; /* PyInterpreterState.threads.head */
	__u32 ts_next;
	__u32 ts_native_tid;
	__u32 ts_cframe;       /* 3.11, 3.12: PyThreadState.cframe; PY_NONE in 3.13+ */
	__u32 cframe_current;  /* _PyCFrame.current_frame, or PyThreadState.current_frame in 3.13+ */
	__u32 fr_code;         /* f_code, or f_executable in 3.13+ */
	__u32 fr_previous;
	__u32 fr_instr;        /* prev_instr, or instr_ptr in 3.13+ */
	__u32 fr_owner;
	__u32 co_filename;
	__u32 co_qualname;
	__u32 co_firstlineno;
	__u32 skip_cstack; /* 3.12+: frames owned by the C stack are shims, not code */
	__u32 fr_locals;   /* localsplus: the frame's first local */
};

struct py_frame {
	__u64 code;
	__u64 instr;
	__u64 qualname;
	__u64 filename;
	__u32 firstlineno;
	__u32 name_tag; /* py_name_tag() of the qualname string */
};

struct py_stack {
	__u32 pid;
	__u32 len;       /* slots filled: min(total, PY_MAX_FRAMES) */
	__u32 truncated; /* more than PY_WALK_LIMIT frames: the outermost were not reached */
	__u32 total;     /* frames walked; past PY_MAX_FRAMES the slots from PY_KEEP_INNER on are a ring */
	struct py_frame frames[PY_MAX_FRAMES];
};

/* Records to user space: a located process's new stack (decode its code
 * objects while they live), and what bpf/pystack itself reports. */
enum py_event_kind {
	PY_EV_STACK = 1,
	PY_EV_EXEC = 2,
	PY_EV_FORK = 3,
	PY_EV_NATIVE = 4, /* a native leaf frame: stack is its id, ip the address */
	PY_EV_EXEC_NATIVE = 5, /* an exec of an image known not to be Python */
};

struct py_event {
	__u32 kind;
	__u32 pid;
	__u32 ppid;
	__u32 pad;
	__u64 stack; /* PY_EV_STACK, PY_EV_FORK, PY_EV_NATIVE: the stack id (0: none) */
	__u64 ts;
	__u64 ip; /* PY_EV_NATIVE: the user instruction pointer */
};

/* Indices into py_lost. */
enum py_lost_kind {
	PY_LOST_TABLE = 0,  /* the stack table was full: the stack is dropped */
	PY_LOST_RING = 1,   /* an event found the ring full */
	PY_LOST_NOTHREAD = 2, /* the thread was not among the interpreter's first PY_MAX_THREADS */
	PY_LOST_KINDS = 3,
};

/* Counters of walks, for the cost measured with bpf_stats. */
enum py_count_kind {
	PY_WALKS = 0,
	PY_NEW = 1,
	PY_REUSES = 2, /* stacks reused without a walk (py_stack_reuse) */
	PY_CHAIN_REUSES = 3, /* stacks reused after a check of every frame (py_same_chain) */
	PY_COUNT_KINDS = 4,
};

/* Bytes read at once from a frame, a code object and a thread state.
 * Each bpf_probe_read_user is a helper call with its own fault-handling
 * setup, dearer than the bytes it copies: one read of a struct's range
 * that holds every field wanted replaces one read per field (a walk read
 * nine times per frame, now three). Every minor's frame fields lie in its
 * first 80 bytes, its code object's in its first 160 (the object is
 * longer: its bytecode follows), its thread state's in its first 256 (the
 * state is larger). A layout whose fields lie further, or a read that
 * fails (a range past the end of a mapping), falls back to one read per
 * field. */
#define PY_FRAME_BLOCK 80
#define PY_CODE_BLOCK 160
#define PY_TS_BLOCK 256
/* The reuse check reads the two innermost frames at once when they lie
 * close together in the thread's frame stack (frames of one chunk are
 * contiguous, the caller's below): from the caller's start to the end of
 * the innermost's fields, up to this many bytes. */
#define PY_PAIR_BLOCK 1024
/* The chain comparison reads the frames of one chunk of the thread's
 * frame stack at once, from the last walk's outermost frame within this
 * many bytes up to the innermost's fields: a dozen frames of an import
 * in one read instead of one read each. */
#define PY_CHAIN_BLOCK 4096

struct py_scratch {
	__u64 hash;
	__u64 ts; /* the walked thread's state (py_stack_reuse keeps it) */
	/* The walk's first two raw frames and their instructions, for
	 * py_stack_reuse's next check. */
	__u64 f0, f1; /* in this order: py_frame_step indexes them from f0 */
	__u64 i0, i1;
	__u64 l0;     /* the innermost's first local */
	__u64 low;    /* the walk's outermost frame within PY_CHAIN_BLOCK of f0 (tstate.py_low) */
	/* Blocks read at once (stack space is short under a bpf_loop). */
	__u8 tsb[PY_TS_BLOCK];
	__u8 fb[PY_FRAME_BLOCK];
	__u8 cb[PY_CODE_BLOCK];
	__u8 pair[PY_PAIR_BLOCK];
	__u8 chain[PY_CHAIN_BLOCK];
	struct py_stack st;
};

/* A preallocated hash, not an LRU one: an LRU update at every fork cost
 * some 8 µs here; entries go at the process's exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tgid */
	__type(value, struct py_conf);
} py_confs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, __u64); /* stack id */
	__type(value, struct py_stack);
} py_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} py_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PY_LOST_KINDS + PY_COUNT_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} py_lost SEC(".maps");

/* Native leaf frames already sent, by id (process, image, address): a
 * process forking, reading or connecting from one place sends it once. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u8);
} py_natives SEC(".maps");

static __always_inline void py_count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&py_lost, &k);
	if (v)
		*v += 1;
}

static __always_inline __u64 py_read_ptr(__u64 addr)
{
	__u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* The thread's tid in its own pid namespace: what CPython stores as
 * native_thread_id inside a container. */
static __always_inline __u32 py_ns_tid(struct task_struct *task_arg)
{
	/* BTF pointers: plain loads. Outside a pid namespace the tid is the
	 * task's own, with no helper call. Through a read-only view: from
	 * the trusted task each pointer load costs the verifier a search
	 * of the kernel's BTF (BTF_VIEW). */
	struct task_struct *task = BTF_VIEW(task_arg, struct task_struct);
	__u32 pid = task->pid; /* loaded first: one load, not one merged with u's */
	struct pid *p = task->thread_pid;
	unsigned int level = p->level;
	struct upid u = {};
	if (level == 0 || level > 31)
		return pid;
	bpf_probe_read_kernel(&u, sizeof(u), &p->numbers[level]);
	return u.nr;
}

/* py_name_tag folds a str's length and hash into 32 bits. Code objects
 * intern their qualnames, so the hash is set; a -1 (not yet computed)
 * that is computed before user space decodes only makes the frame "?". */
static __always_inline __u32 py_name_tag(__u64 len, __u64 hash)
{
	return (__u32)(hash ^ (hash >> 32)) ^ ((__u32)len * 0x9e3779b1u);
}

static __always_inline __u64 py_mix(__u64 h, __u64 v)
{
	h ^= v;
	h *= 0x100000001b3ULL;
	return h ^ (h >> 29);
}

struct py_walk_ctx {
	struct py_scratch *sc;
	struct py_conf *c;
	__u64 ptr;  /* the thread state being matched, then the frame to read */
	__u64 hash;
	__u32 tid;
	__u32 pad;
};

/* The 8 bytes at off of a block of size bytes read from user memory
 * (0 past its end). */
static __always_inline __u64 py_blk64(__u8 *b, __u32 off, __u32 size)
{
	if (off > size - 8)
		return 0;
	return *(__u64 *)(b + off);
}

static __always_inline __u32 py_blk32(__u8 *b, __u32 off, __u32 size)
{
	if (off > size - 4)
		return 0;
	return *(__u32 *)(b + off);
}

/* Whether thread state ts is thread tid's, and its innermost frame (in
 * *top): one read of the state's first PY_TS_BLOCK bytes when the
 * layout's fields lie there, a read per field otherwise. */
static __always_inline bool py_ts_check(struct py_scratch *sc, struct py_conf *c, __u64 ts, __u32 tid, __u64 *top)
{
	bool nocf = c->ts_cframe == PY_NONE;
	__u32 fr = nocf ? c->cframe_current : c->ts_cframe;
	*top = 0;
	if (c->ts_native_tid <= PY_TS_BLOCK - 8 && fr <= PY_TS_BLOCK - 8 &&
	    !bpf_probe_read_user(sc->tsb, PY_TS_BLOCK, (void *)ts)) {
		if (py_blk64(sc->tsb, c->ts_native_tid, PY_TS_BLOCK) != tid)
			return false;
		__u64 p = py_blk64(sc->tsb, fr, PY_TS_BLOCK);
		*top = nocf ? p : py_read_ptr(p + c->cframe_current);
		return true;
	}
	if (py_read_ptr(ts + c->ts_native_tid) != tid)
		return false;
	if (nocf)
		*top = py_read_ptr(ts + c->cframe_current);
	else
		*top = py_read_ptr(py_read_ptr(ts + c->ts_cframe) + c->cframe_current);
	return true;
}

/* One thread state per call: stop at the one whose native_thread_id is
 * the walked thread's (ptr stays on it) or at the list's end (ptr 0). */
static long py_thread_step(__u64 i, struct py_walk_ctx *w)
{
	if (!w->ptr)
		return 1;
	if (py_read_ptr(w->ptr + w->c->ts_native_tid) == w->tid)
		return 1;
	w->ptr = py_read_ptr(w->ptr + w->c->ts_next);
	if (i == PY_MAX_THREADS - 1)
		w->ptr = 0;
	return 0;
}

/* A frame's previous frame, code, instruction and owner: one read of
 * its first PY_FRAME_BLOCK bytes (every minor's fields lie there), a
 * read per field when that read fails.
 * Global, as py_read_code: the verifier checks each once per program;
 * inlined, each of their branches went through the rest of the frame
 * step as states of their own (2.5 times the instructions checked, in
 * every program that takes stacks). */
struct py_frame_fields {
	__u64 previous, code, instr;
	__u8 owner;
};

/* A frame's fields from b, its first PY_FRAME_BLOCK bytes as read. */
static __always_inline void py_frame_from(__u8 *b, struct py_conf *c, struct py_frame_fields *f)
{
	f->previous = py_blk64(b, c->fr_previous, PY_FRAME_BLOCK);
	f->code = py_blk64(b, c->fr_code, PY_FRAME_BLOCK);
	f->instr = py_blk64(b, c->fr_instr, PY_FRAME_BLOCK);
	__u32 o = c->fr_owner;
	f->owner = o < PY_FRAME_BLOCK ? b[o] : 0;
}

__noinline int py_read_frame(struct py_scratch *sc, struct py_conf *c, __u64 cur, struct py_frame_fields *f)
{
	if (!sc || !c || !f)
		return 0;
	__u8 *b = sc->fb;
	if (c->fr_previous <= PY_FRAME_BLOCK - 8 && c->fr_code <= PY_FRAME_BLOCK - 8 &&
	    c->fr_instr <= PY_FRAME_BLOCK - 8 && c->fr_owner < PY_FRAME_BLOCK &&
	    !bpf_probe_read_user(b, PY_FRAME_BLOCK, (void *)cur)) {
		py_frame_from(b, c, f);
		return 0;
	}
	f->previous = py_read_ptr(cur + c->fr_previous);
	f->code = py_read_ptr(cur + c->fr_code);
	f->instr = py_read_ptr(cur + c->fr_instr);
	f->owner = 0;
	if (c->skip_cstack)
		bpf_probe_read_user(&f->owner, 1, (void *)(cur + c->fr_owner));
	return 0;
}

/* A code object's type, qualname, filename and first line into f (code
 * and instr already set); 0 when it is not a code object. */
__noinline int py_read_code(struct py_scratch *sc, struct py_conf *c, struct py_frame *f)
{
	if (!sc || !c || !f)
		return 0;
	__u8 *b = sc->cb;
	__u64 code = f->code, type;
	if (c->co_qualname <= PY_CODE_BLOCK - 8 && c->co_filename <= PY_CODE_BLOCK - 8 &&
	    c->co_firstlineno <= PY_CODE_BLOCK - 4 && !bpf_probe_read_user(b, PY_CODE_BLOCK, (void *)code)) {
		type = py_blk64(b, 8, PY_CODE_BLOCK);
		f->qualname = py_blk64(b, c->co_qualname, PY_CODE_BLOCK);
		f->filename = py_blk64(b, c->co_filename, PY_CODE_BLOCK);
		f->firstlineno = py_blk32(b, c->co_firstlineno, PY_CODE_BLOCK);
		return type == c->code_type;
	}
	if (py_read_ptr(code + 8) != c->code_type)
		return false;
	f->qualname = py_read_ptr(code + c->co_qualname);
	f->filename = py_read_ptr(code + c->co_filename);
	f->firstlineno = 0;
	bpf_probe_read_user(&f->firstlineno, 4, (void *)(code + c->co_firstlineno));
	return true;
}

/* One frame per call, innermost first; shims owned by the C stack and
 * frames whose code is not a code object are passed over. The first two
 * raw frames are kept for py_stack_reuse. */
static long py_frame_step(__u64 i, struct py_walk_ctx *w)
{
	struct py_conf *c = w->c;
	__u64 cur = w->ptr;
	if (!cur)
		return 1;
	struct py_frame_fields ff = {};
	py_read_frame(w->sc, c, cur, &ff);
	w->ptr = ff.previous;
	/* One branch, not one per frame kept: each branch's states went
	 * through the rest of the step on their own. */
	if (i < 2) {
		__u64 *fi = &w->sc->f0;
		fi[i & 1] = cur;
		fi[2 + (i & 1)] = ff.instr;
	}
	__u64 f0 = w->sc->f0;
	if (cur <= f0 && f0 + PY_FRAME_BLOCK - cur <= PY_CHAIN_BLOCK && (!w->sc->low || cur < w->sc->low))
		w->sc->low = cur;
	if (c->skip_cstack && ff.owner >= PY_OWNED_BY_CSTACK)
		return 0;
	__u64 code = ff.code & ~PY_REF_TAG_BITS;
	if (!code)
		return 0;
	/* The count lives in the scratch map, not in this context: read
	 * back from a map it is any number to the verifier, so the loop's
	 * states agree after one step; on the stack its range grew step by
	 * step, and each step was checked again (some 20 ms of verification
	 * per program that takes stacks). */
	__u32 n = w->sc->st.total, slot = n;
	if (slot >= PY_MAX_FRAMES)
		slot = PY_KEEP_INNER + ((slot - PY_KEEP_INNER) & (PY_MAX_FRAMES - PY_KEEP_INNER - 1));
	struct py_frame *f = &w->sc->st.frames[slot & (PY_MAX_FRAMES - 1)];
	f->code = code;
	if (!py_read_code(w->sc, c, f))
		return 0;
	f->instr = ff.instr;
	/* The name's length and hash, read into the scratch's pair block
	 * (free during a walk): on the stack they put the page-cache
	 * object's deepest call chain over the verifier's 512 bytes. */
	__u64 *lh = (__u64 *)w->sc->pair;
	lh[0] = lh[1] = 0;
	bpf_probe_read_user(lh, 16, (void *)(f->qualname + PY_STR_LEN));
	f->name_tag = py_name_tag(lh[0], lh[1]);
	w->hash = py_mix(w->hash, code);
	w->hash = py_mix(w->hash, f->instr);
	w->hash = py_mix(w->hash, f->qualname ^ (f->filename << 17));
	w->hash = py_mix(w->hash, ((__u64)f->name_tag << 32) | f->firstlineno);
	w->sc->st.total = n + 1;
	return 0;
}

/* The innermost frame of thread state ts: _PyCFrame.current_frame (3.11,
 * 3.12) or PyThreadState.current_frame (3.13). */
static __always_inline __u64 py_top_frame(struct py_conf *c, __u64 ts)
{
	if (c->ts_cframe != PY_NONE)
		return py_read_ptr(py_read_ptr(ts + c->ts_cframe) + c->cframe_current);
	return py_read_ptr(ts + c->cframe_current);
}

/* py_walk walks the frames of thread tid (namespace tid) of process tgid
 * into the CPU's scratch stack and stores it in py_stacks under its
 * hash. Returns 0 (no stack), 1 (a new stack: a PY_EV_STACK record went
 * out) or 2 (a stack already known); the id is in the scratch's hash.
 * Global, so the verifier checks it once per program whatever calls it;
 * the loops are bpf_loop callbacks, each verified once. */
__noinline int py_walk(__u32 tgid, __u32 tid, __u64 hint)
{
	__u32 zero = 0;
	struct py_scratch *sc = bpf_map_lookup_elem(&py_scratch, &zero);
	struct py_conf *c = bpf_map_lookup_elem(&py_confs, &tgid);
	if (!sc || !c)
		return 0;
	py_count(PY_LOST_KINDS + PY_WALKS);
	sc->hash = 0;
	sc->f0 = sc->i0 = sc->f1 = sc->i1 = sc->l0 = sc->low = 0;
	/* Few locals: this frame lies in the deepest call chains of the
	 * objects that take stacks, which the verifier holds to 512 bytes. */
	struct py_walk_ctx w = {.sc = sc, .c = c, .tid = tid};
	/* The thread's state of its last walk, still its own: no walk of
	 * the interpreter's thread list. */
	if (hint && py_ts_check(sc, c, hint, tid, &w.ptr)) {
		sc->ts = hint;
	} else {
		__u64 interp = py_read_ptr(c->runtime + c->interp_head);
		if (!interp)
			return 0;
		w.ptr = py_read_ptr(interp + c->threads_head);
		bpf_loop(PY_MAX_THREADS, py_thread_step, &w, 0);
		if (!w.ptr) {
			py_count(PY_LOST_NOTHREAD);
			return 0;
		}
		sc->ts = w.ptr;
		w.ptr = py_top_frame(c, w.ptr);
	}
	w.hash = 0xcbf29ce484222325ULL ^ tgid;
	sc->st.pid = tgid;
	sc->st.truncated = 0;
	sc->st.total = 0;
	bpf_loop(PY_WALK_LIMIT, py_frame_step, &w, 0);
	if (sc->f0)
		sc->l0 = py_read_ptr(sc->f0 + c->fr_locals);
	__u32 n = sc->st.total;
	if (!n)
		return 0;
	sc->st.len = n < PY_MAX_FRAMES ? n : PY_MAX_FRAMES;
	sc->st.truncated = w.ptr != 0;
	sc->hash = w.hash ? w.hash : 1;
	/* A known stack is found by a lookup: the update alone would cost
	 * the allocation of a 5 KiB element before it finds the key. */
	if (bpf_map_lookup_elem(&py_stacks, &sc->hash))
		return 2;
	long err = bpf_map_update_elem(&py_stacks, &sc->hash, &sc->st, BPF_NOEXIST);
	if (err == -17 /* EEXIST */)
		return 2;
	if (err) {
		py_count(PY_LOST_TABLE);
		sc->hash = 0;
		return 0;
	}
	py_count(PY_LOST_KINDS + PY_NEW);
	struct py_event *ev = bpf_ringbuf_reserve(&py_events, sizeof(*ev), 0);
	if (!ev) {
		py_count(PY_LOST_RING);
		return 1;
	}
	ev->kind = PY_EV_STACK;
	ev->pid = tgid;
	ev->ppid = 0;
	ev->pad = 0;
	ev->stack = sc->hash;
	ev->ts = bpf_ktime_get_ns();
	ev->ip = 0;
	/* Woken at once: user space must read the code objects while the
	 * frames still run them. Not the default wake-up, which wakes the
	 * reader only when it has read everything before (fork records are
	 * submitted without one), so a run of forks left every new stack to
	 * be decoded after its process had gone. */
	bpf_ringbuf_submit(ev, BPF_RB_FORCE_WAKEUP);
	return 1;
}

/* py_stack_here is the stack id of the current thread, 0 when none. */
static __always_inline __u64 py_stack_here(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *task = bpf_get_current_task_btf();
	if (py_walk(id >> 32, py_ns_tid(task), 0) == 0)
		return 0;
	__u32 zero = 0;
	struct py_scratch *sc = bpf_map_lookup_elem(&py_scratch, &zero);
	return sc ? sc->hash : 0;
}

/* What py_frames_unchanged finds. */
enum py_pair_check {
	PY_CHANGED = 0,
	PY_SAME = 1,
	/* The two innermost frames unchanged, the innermost's first local
	 * not (in sc->l0): the callers may have changed. */
	PY_SAME_BUT_FIRST_LOCAL = 2,
};

/* Whether the thread's innermost frame (s->py_f0, checked current) and
 * its caller are still at the instructions of the last walk, the
 * innermost with the same first local: one read of both when they lie
 * close together, else one read per frame. The local tells apart two
 * calls of one function from one line of one caller, whose frames lie
 * at the same addresses: two modules imported one after the other read
 * their source in importlib's get_data(self, path) at the same place,
 * each with its own loader as self, while a loop of reads in one call
 * keeps its first argument. Where only the local differs (read into
 * sc->l0), py_same_chain decides whether the callers changed. */
static __always_inline int py_frames_unchanged(struct py_scratch *sc, struct py_conf *c, struct tstate *s)
{
	__u64 f0 = s->py_f0, f1 = s->py_f1;
	__u64 l0;
	if (f1 && f1 < f0 && f0 - f1 <= PY_PAIR_BLOCK - PY_FRAME_BLOCK && c->fr_previous <= PY_FRAME_BLOCK - 8 &&
	    c->fr_instr <= PY_FRAME_BLOCK - 8) {
		__u32 d = f0 - f1;
		__u32 len = d + PY_FRAME_BLOCK;
		if (len <= PY_PAIR_BLOCK && !bpf_probe_read_user(sc->pair, len, (void *)f1)) {
			if (py_blk64(sc->pair, d + c->fr_previous, PY_PAIR_BLOCK) != f1 ||
			    py_blk64(sc->pair, d + c->fr_instr, PY_PAIR_BLOCK) != s->py_i0 ||
			    py_blk64(sc->pair, c->fr_instr, PY_PAIR_BLOCK) != s->py_i1)
				return PY_CHANGED;
			if (c->fr_locals <= PY_FRAME_BLOCK - 8)
				l0 = py_blk64(sc->pair, d + c->fr_locals, PY_PAIR_BLOCK);
			else
				l0 = py_read_ptr(f0 + c->fr_locals);
			sc->l0 = l0;
			return l0 == s->py_l0 ? PY_SAME : PY_SAME_BUT_FIRST_LOCAL;
		}
	}
	struct py_frame_fields ff = {};
	py_read_frame(sc, c, f0, &ff);
	if (ff.previous != f1 || ff.instr != s->py_i0 || (f1 && py_read_ptr(f1 + c->fr_instr) != s->py_i1))
		return PY_CHANGED;
	l0 = py_read_ptr(f0 + c->fr_locals);
	sc->l0 = l0;
	return l0 == s->py_l0 ? PY_SAME : PY_SAME_BUT_FIRST_LOCAL;
}

/* One raw frame per call of the chain comparison (py_same_chain): the
 * frame's code and instruction against the next frame of the stored
 * stack, with the walk's own skips (shims, frames without code). Stops
 * (1) at the chain's end or at the first difference; ok says which. */
struct py_chain_ctx {
	struct py_scratch *sc;
	struct py_conf *c;
	struct py_stack *st;
	__u64 ptr;
	__u64 base; /* the frames read at once: [base, base + len) in sc->chain */
	__u32 len;
	__u32 n;  /* stored frames matched */
	__u32 ok; /* the chain ended with every stored frame matched */
};

static long py_chain_step(__u64 i, struct py_chain_ctx *w)
{
	__u64 cur = w->ptr;
	if (!cur) {
		w->ok = w->n == w->st->total;
		return 1;
	}
	struct py_conf *c = w->c;
	struct py_frame_fields ff = {};
	__u64 off = cur - w->base;
	if (w->len && cur >= w->base && off + PY_FRAME_BLOCK <= w->len && off <= PY_CHAIN_BLOCK - PY_FRAME_BLOCK) {
		/* py_same_chain checked that the fields lie in the block. */
		py_frame_from(w->sc->chain + off, c, &ff);
	} else {
		py_read_frame(w->sc, c, cur, &ff);
	}
	w->ptr = ff.previous;
	if (w->c->skip_cstack && ff.owner >= PY_OWNED_BY_CSTACK)
		return 0;
	__u64 code = ff.code & ~PY_REF_TAG_BITS;
	if (!code)
		return 0;
	__u32 n = w->n;
	if (n >= w->st->total || n >= PY_MAX_FRAMES)
		return 1;
	struct py_frame *f = &w->st->frames[n & (PY_MAX_FRAMES - 1)];
	if (f->code != code || f->instr != ff.instr)
		return 1;
	w->n = n + 1;
	return 0;
}

/* Whether the thread's whole chain of frames, from its innermost f0 out,
 * runs the same code objects at the same instructions as the stored
 * stack id: one read per frame, where a walk reads three (the frame,
 * its code object, its name). The two innermost frames' check says
 * nothing of the callers when the innermost's first local changed (a
 * module's import reads its bytecode in importlib's get_data, one
 * loader a module: every import of a loop came to a whole walk, about
 * 2 µs of each cold module's insertion); this check finds the loop's
 * line unchanged, or the walk runs. A frame's code object is compared
 * by address, as the two innermost frames' check compares instructions:
 * a code object freed and another made at its address with the same
 * instruction offset under the same caller would be taken for it, as
 * it is there. Stacks past PY_MAX_FRAMES (a ring) are walked. */
static __always_inline bool py_same_chain(struct py_scratch *sc, struct py_conf *c, __u64 f0, __u64 id, __u64 low)
{
	struct py_stack *st = bpf_map_lookup_elem(&py_stacks, &id);
	if (!st || st->truncated || st->total > PY_MAX_FRAMES || st->total == 0)
		return false;
	struct py_chain_ctx w = {.sc = sc, .c = c, .st = st, .ptr = f0};
	/* The frames from the last walk's outermost in reach up to the
	 * innermost's fields, in one read, where every field the step
	 * reads lies in a frame's first PY_FRAME_BLOCK bytes; a frame
	 * outside it (another chunk) is read on its own. */
	__u64 len = f0 + PY_FRAME_BLOCK - low;
	if (low && low <= f0 && len <= PY_CHAIN_BLOCK && c->fr_previous <= PY_FRAME_BLOCK - 8 &&
	    c->fr_code <= PY_FRAME_BLOCK - 8 && c->fr_instr <= PY_FRAME_BLOCK - 8 && c->fr_owner < PY_FRAME_BLOCK &&
	    !bpf_probe_read_user(sc->chain, len, (void *)low)) {
		w.base = low;
		w.len = len;
	}
	bpf_loop(PY_MAX_FRAMES * 2, py_chain_step, &w, 0);
	return w.ok;
}

/* py_stack_reuse is py_stack_here for a thread whose state s keeps its
 * last walk: the thread is in the kernel, its frames still, so when its
 * two innermost frames (address and instruction) are those of the last
 * walk, the last stack is taken again for a few reads instead of a walk
 * of the thread list and every frame. Outer frames that changed under
 * two unchanged innermost ones go unseen: the documented price. */
static __always_inline __u64 py_stack_reuse(struct tstate *s)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct py_conf *c = bpf_map_lookup_elem(&py_confs, &tgid);
	if (!c) {
		s->py_last = 0;
		return 0;
	}
	__u32 tid = py_ns_tid(bpf_get_current_task_btf());
	__u32 zero = 0;
	struct py_scratch *sc = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!sc) {
		s->py_last = 0;
		return 0;
	}
	__u64 hint = s->py_ts;
	__u64 f0 = 0;
	if (s->py_last && hint && py_ts_check(sc, c, hint, tid, &f0) && f0 && f0 == s->py_f0) {
		int same = py_frames_unchanged(sc, c, s);
		if (same == PY_SAME) {
			py_count(PY_LOST_KINDS + PY_REUSES);
			return s->py_last;
		}
		if (same == PY_SAME_BUT_FIRST_LOCAL && py_same_chain(sc, c, f0, s->py_last, s->py_low)) {
			s->py_l0 = sc->l0;
			py_count(PY_LOST_KINDS + PY_CHAIN_REUSES);
			return s->py_last;
		}
	}
	s->py_last = 0;
	if (py_walk(tgid, tid, hint) == 0)
		return 0;
	if (!sc->hash)
		return 0;
	s->py_ts = sc->ts;
	s->py_f0 = sc->f0;
	s->py_i0 = sc->i0;
	s->py_f1 = sc->f1;
	s->py_i1 = sc->i1;
	s->py_l0 = sc->l0;
	s->py_low = sc->low;
	s->py_last = sc->hash;
	return sc->hash;
}

/* py_stack_current takes the current thread's stack with py_stack_reuse
 * into its state's py_last (0: none), which callers read after. Global:
 * verified once per object, not at each of its callers (a page-cache
 * object inlining it at its seven fill-opening sites took some 12 ms
 * longer to load). */
__noinline int py_stack_current(void)
{
	struct tstate *s = current_state();
	if (s)
		py_stack_reuse(s);
	return 0;
}

/* py_native_leaf is the id of task's leaf native frame, for an event of a
 * thread with no Python stack to take (not Python, an interpreter whose
 * layout is not known, a thread without Python frames): the user
 * instruction pointer its kernel entry returns to, in the C library's
 * wrapper when the program calls the system through it (read, connect,
 * fork), or the instruction that faulted. The id mixes the process, its
 * image (mm: an exec maps other code at the same address) and the
 * address; a new one is sent to user space at once, to be symbolized
 * while the process lives. A known one costs a hash lookup. */
static __always_inline __u64 py_native_leaf(struct task_struct *task, __u32 tgid)
{
	if (!task)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	__u64 ip = BPF_CORE_READ(regs, ip);
	if (!ip)
		return 0;
	__u64 id = py_mix(py_mix(0x6e61746976650000ULL ^ tgid, (__u64)BPF_CORE_READ(task, mm)), ip);
	if (!id)
		id = 1;
	if (bpf_map_lookup_elem(&py_natives, &id))
		return id;
	__u8 one = 1;
	bpf_map_update_elem(&py_natives, &id, &one, BPF_ANY);
	struct py_event *ev = bpf_ringbuf_reserve(&py_events, sizeof(*ev), 0);
	if (!ev) {
		py_count(PY_LOST_RING);
		return id;
	}
	ev->kind = PY_EV_NATIVE;
	ev->pid = tgid;
	ev->ppid = 0;
	ev->pad = 0;
	ev->stack = id;
	ev->ts = bpf_ktime_get_ns();
	ev->ip = ip;
	/* Woken at once: symbolized from the process's mappings while it
	 * lives. */
	bpf_ringbuf_submit(ev, BPF_RB_FORCE_WAKEUP);
	return id;
}

/* Set at load by user space when the walker's maps are the stack
 * sensor's (not --no-stacks): without a reader, a leaf would only fill
 * the tables and the ring. */
const volatile __u32 py_stacks_on = 0;

/* py_stack_or_leaf is the current thread's Python stack (kept in its
 * state s, reused while its two innermost frames are unchanged) or, when
 * it has none, its leaf native frame. Global, like py_stack_current. */
__noinline __u64 py_stack_or_leaf(void)
{
	if (!py_stacks_on)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct tstate *s = bpf_task_storage_get(&task_states, task, 0, 0);
	if (!s)
		return 0;
	__u64 stack = 0;
	if (s->flags & TF_PYTHON)
		stack = py_stack_reuse(s);
	if (!stack)
		stack = py_native_leaf(task, bpf_get_current_pid_tgid() >> 32);
	return stack;
}
