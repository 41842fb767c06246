/* Writes to an object's hash tables, counted per CPU: the poller walks
 * the tables (all their buckets, however few entries) only when the count
 * has moved, so a run that writes none pays one lookup a poll. For the
 * objects whose tables change rarely (bpf/evict, bpf/download). */
#ifndef COLDTRACE_TABLE_WRITES_H
#define COLDTRACE_TABLE_WRITES_H

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} table_writes SEC(".maps");

static __always_inline void count_write(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&table_writes, &zero);
	if (n)
		*n += 1;
}

#endif
