/* The order of a file's page-cache misses, kept per file in the kernel:
 * where each miss starts relative to the page after the previous one,
 * as a five-bucket histogram, and how often a jump repeats the previous
 * jump (a strided walk). User space reads the map once, at the end, and
 * tells sequential, strided and random reads apart from it (issue 18).
 * Updated without atomics: two threads missing the same file at once
 * may lose a count; the pattern survives. */
#pragma once

#include "common.h"
#include "files.h"

#define ORDER_JUMP_NEAR 32    /* pages: 128 KiB */
#define ORDER_JUMP_FAR 2048   /* pages: 8 MiB */

struct read_order {
	__u64 next;   /* the page after the previous miss */
	__s64 last_jump;
	__u64 misses; /* insertions (folios) */
	__u64 fault_pages;
	__u64 read_pages;
	__u64 jumps[5]; /* 0: contiguous, 1: <= NEAR forward, 2: <= FAR, 3: further, 4: backward */
	__u64 same_stride;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FILES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct file_key);
	__type(value, struct read_order);
} read_orders SEC(".maps");

/* note_order counts one miss of n pages at index lo of the file whose
 * entry is fs; fault: it came in a page fault (mmap), not a read
 * syscall. A file's first miss stays in its entry (file_stats'
 * order_*); its second makes its read_orders entry, with the first in it. */
static __always_inline void note_order(struct file_key *key, struct file_stats *fs, __u64 lo, __u64 n, bool fault)
{
	if (!fs->order_next) {
		fs->order_next = lo + n;
		fs->order_pages = n;
		fs->order_fault = fault;
		return;
	}
	struct read_order *o = bpf_map_lookup_elem(&read_orders, key);
	if (!o) {
		struct read_order first = {};
		first.next = fs->order_next;
		first.misses = 1;
		if (fs->order_fault)
			first.fault_pages = fs->order_pages;
		else
			first.read_pages = fs->order_pages;
		bpf_map_update_elem(&read_orders, key, &first, BPF_NOEXIST);
		o = bpf_map_lookup_elem(&read_orders, key);
		if (!o)
			return; /* table full: the file gets no order */
	}
	if (fault)
		o->fault_pages += n;
	else
		o->read_pages += n;
	if (o->misses) {
		__s64 jump = (__s64)(lo - o->next);
		__u32 b = 4;
		if (jump == 0)
			b = 0;
		else if (jump > 0 && jump <= ORDER_JUMP_NEAR)
			b = 1;
		else if (jump > 0 && jump <= ORDER_JUMP_FAR)
			b = 2;
		else if (jump > 0)
			b = 3;
		if (b > 4)
			b = 4;
		o->jumps[b]++;
		if (jump != 0 && jump == o->last_jump)
			o->same_stride++;
		o->last_jump = jump;
	}
	o->misses++;
	o->next = lo + n;
}
