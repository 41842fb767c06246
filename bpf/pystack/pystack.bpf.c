//go:build ignore

/* Python stacks: where a located CPython process's threads stand when it
 * forks (the stack a compiler subprocess is charged to), with the walker
 * of bpf/include/pywalk.h. User space locates interpreters at their exec
 * and fills py_confs; a fork copies the parent's entry (a forked Python is
 * the same interpreter until it execs) and the stack id, which descendants
 * inherit until a Python process forks again. */
#include "pywalk.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The stack each process was started from, by tgid; removed at its
 * exit (user space has it from the PY_EV_FORK record). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} fork_stacks SEC(".maps");

/* Fixed-address Pythons already located (Debian's static, non-PIE
 * python3), by the inode of the executable: their exec installs the
 * configuration at once, with no wait for user space. */
struct py_exe_key {
	__u64 ino;
	__u32 dev; /* s_dev, the kernel's major<<20|minor */
	__u32 pad;
};

/* Executables user space has looked at: a non-PIE Python's walker
 * configuration, or a zero one (runtime 0) for an image that is not
 * Python. LRU: an image pushed out is looked at again. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct py_exe_key);
	__type(value, struct py_conf);
} py_exes SEC(".maps");

BTF_ANCHOR(struct py_event, py_event);
BTF_ANCHOR(enum py_event_kind, py_event_kind);
BTF_ANCHOR(enum py_lost_kind, py_lost_kind);
BTF_ANCHOR(enum py_count_kind, py_count_kind);

static __always_inline void emit(__u32 kind, __u32 pid, __u32 ppid, __u64 stack, __u64 ip, bool lazy)
{
	struct py_event *ev = bpf_ringbuf_reserve(&py_events, sizeof(*ev), 0);
	if (!ev) {
		py_count(PY_LOST_RING);
		return;
	}
	ev->kind = kind;
	ev->pid = pid;
	ev->ppid = ppid;
	ev->pad = 0;
	ev->stack = stack;
	ev->ts = bpf_ktime_get_ns();
	ev->ip = ip;
	/* An exec of an image user space has not looked at wakes the reader
	 * at once: the interpreter must be located before its first
	 * statement runs; so does a native leaf, symbolized from the
	 * process's mappings while it lives. A fork's record, and an exec of
	 * an image already looked at (lazy), wait for the next wake-up (an
	 * exec, a new stack, a half-full ring) or the flush at the end: the
	 * forced wake-up (an IPI on a VM) was 15 µs of every fork here, three
	 * times the walk, and half the exec program's cost in a fork/exec
	 * storm. */
	__u64 wake = BPF_RB_FORCE_WAKEUP;
	if (lazy)
		wake = ring_wakeup(&py_events);
	bpf_ringbuf_submit(ev, wake);
}

/* Runs in the parent, before the child is woken. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_py_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!task_state(parent))
		return 0;
	__u32 ctid = BPF_CORE_READ(child, pid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ctid != ctgid)
		return 0; /* thread creation takes no stack */
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u64 stack = 0;
	struct py_conf *c = bpf_map_lookup_elem(&py_confs, &ptgid);
	if (c) {
		struct py_conf copy = *c;
		bpf_map_update_elem(&py_confs, &ctgid, &copy, BPF_ANY);
		stack = py_stack_here();
	}
	if (!stack) {
		__u64 *inh = bpf_map_lookup_elem(&fork_stacks, &ptgid);
		if (inh)
			stack = *inh;
	}
	if (!stack)
		stack = py_native_leaf(parent, ptgid);
	if (!stack)
		return 0;
	bpf_map_update_elem(&fork_stacks, &ctgid, &stack, BPF_ANY);
	emit(PY_EV_FORK, ctgid, ptgid, stack, 0, true);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_py_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (BPF_CORE_READ(p, pid) != tgid || !task_state(p))
		return 0;
	bpf_map_delete_elem(&py_confs, &tgid);
	bpf_map_delete_elem(&fork_stacks, &tgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_py_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct tstate *ts = task_state(p);
	if (!ts)
		return 0;
	/* A new image: whatever interpreter the process ran is gone, and
	 * with it the thread's last walk (py_stack_reuse). */
	ts->py_last = 0;
	ts->py_ts = 0;
	__u32 tgid = BPF_CORE_READ(p, tgid);
	bpf_map_delete_elem(&py_confs, &tgid);
	struct inode *ino = BPF_CORE_READ(bprm, file, f_inode);
	struct py_exe_key k = {.ino = BPF_CORE_READ(ino, i_ino), .dev = BPF_CORE_READ(ino, i_sb, s_dev)};
	struct py_conf *known = bpf_map_lookup_elem(&py_exes, &k);
	if (known && known->runtime) {
		struct py_conf copy = *known;
		bpf_map_update_elem(&py_confs, &tgid, &copy, BPF_ANY);
	}
	/* A known image is configured already (or is not Python): nothing
	 * in user space is urgent, and for one that is not Python nothing is
	 * to be located (a shell loop's or a build's children: user space
	 * only forgets the process's previous image). */
	emit(known && !known->runtime ? PY_EV_EXEC_NATIVE : PY_EV_EXEC, tgid, 0, 0, 0, known != NULL);
	return 0;
}
