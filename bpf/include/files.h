/* The per-file counters, written by the page-cache object (accesses,
 * misses, fill CPU) and the scheduler object (I/O wait at the switch in,
 * fill CPU stopped at the switch out). The scheduler object creates the
 * map; the page-cache object takes it as a map replacement. */
#pragma once

#include "common.h"
#include "syscall64.h"

struct file_stats {
	__u64 accessed;
	__u64 missed;
	__u64 evicted;
	__u64 iowait_ns;
	__u64 miss_cpu_ns;
	__u64 created; /* pages inserted by writes: new data, not read from disk */
	__u32 last_tgid;
	__u32 path_sent;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FILES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct file_key);
	__type(value, struct file_stats);
} files SEC(".maps");

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
	if (th)
		th->miss_cpu_ns += d;
	if (s->cur.ino) {
		struct file_stats *fs = bpf_map_lookup_elem(&files, &s->cur);
		if (fs)
			__sync_fetch_and_add(&fs->miss_cpu_ns, d);
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
