//go:build ignore

/* coldtrace's eviction sensor: who drops the run's file pages from the
 * page cache during the run, and who else reads them from disk.
 *
 * mm_filemap_delete_from_page_cache runs in the context of whoever
 * evicts: kswapd (global memory pressure), a thread in direct reclaim
 * (global, or its memory cgroup's limit: the vmscan begin/end events
 * bracket it), kdamond (DAMON), or the caller of fadvise, truncate or
 * unlink. Deletions can come at hundreds of thousands a second, so they
 * are counted in the kernel, per (file, evicting process, kind, syscall),
 * and only for files the run touched (an entry in the files map): the
 * rest cost one task-independent hash lookup.
 *
 * Insertions by processes that are not traced, into files the run
 * touched, are counted per (file, process): they tell a read that was
 * served by another reader (bpf/pagecache: shared) and name it.
 *
 * The files and run_pages maps are the scheduler object's (bpf/sched),
 * given at load time as map replacements. Tracepoints only.
 *
 * Cost measured here (bpf_stats, a 512 MiB file read three times in a
 * 256 MiB memory cgroup, 2026-12): on_delete 280 ns per evicted folio
 * (7,683 runs), on_memcg_begin/end 309/167 ns, on_other_insert 83 ns per
 * insertion anywhere; the run_pages bitmap raised bpf/pagecache's
 * on_add_to_cache from 426 to 821 ns per inserted folio. About 6 ms in a
 * 1.1 s run that evicted 1.25 GiB. */

#include "common.h"
#include "files.h"
#include "syscall64.h"
#include "table_writes.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* evict_key.kind. Exported to Go by bpf2go. */
enum evict_kind {
	EVICT_SYSCALL = 1,        /* a process in a syscall (fadvise, truncate, unlink, ...), not reclaiming */
	EVICT_DIRECT_RECLAIM = 2, /* a thread in global direct reclaim */
	EVICT_MEMCG_RECLAIM = 3,  /* a thread reclaiming for its memory cgroup's limit */
	EVICT_KSWAPD = 4,         /* kswapd: global memory pressure */
	EVICT_KDAMOND = 5,        /* DAMON's kdamond */
	EVICT_KERNEL = 6,         /* another kernel thread, or outside a syscall */
};

BTF_ANCHOR(enum evict_kind, evict_kind);

struct evict_key {
	__u32 dev;
	__u32 tgid;
	__u64 ino;
	__u32 kind;
	__s32 nr; /* the syscall, or -1 */
	__u32 gen; /* the inode's generation: file_key's */
	__u32 pad;
};

struct evict_stats {
	__u64 pages;
	__u64 events;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct evict_key);
	__type(value, struct evict_stats);
} evictors SEC(".maps");

struct inserter_key {
	__u32 dev;
	__u32 tgid;
	__u64 ino;
	__u32 gen; /* file_key's */
	__u32 pad;
};

struct inserter_stats {
	__u64 pages;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct inserter_key);
	__type(value, struct inserter_stats);
} inserters SEC(".maps");

/* Threads inside a reclaim bracket: tid -> evict_kind. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} reclaiming SEC(".maps");

#define PF_KTHREAD_ 0x00200000
#define PF_KSWAPD_ 0x00020000

static __always_inline void reclaim_begin(__u32 kind)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	bpf_map_update_elem(&reclaiming, &tid, &kind, BPF_ANY);
}

static __always_inline void reclaim_end(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	bpf_map_delete_elem(&reclaiming, &tid);
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(on_direct_begin, int order, gfp_t gfp)
{
	reclaim_begin(EVICT_DIRECT_RECLAIM);
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(on_direct_end, unsigned long reclaimed)
{
	reclaim_end();
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(on_memcg_begin, int order, gfp_t gfp)
{
	reclaim_begin(EVICT_MEMCG_RECLAIM);
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(on_memcg_end, unsigned long reclaimed)
{
	reclaim_end();
	return 0;
}

static __always_inline bool is_kdamond(const char *comm)
{
	return comm[0] == 'k' && comm[1] == 'd' && comm[2] == 'a' && comm[3] == 'm' && comm[4] == 'o' &&
	       comm[5] == 'n' && comm[6] == 'd';
}

/* Folio order: the head flag says a large folio, whose order sits in
 * the low byte of its second page's flags. */
static __always_inline __u32 folio_order(struct folio *folio)
{
	if (folio->flags.f & (1ull << bpf_core_enum_value(enum pageflags, PG_head)))
		return folio->_flags_1 & 0xff;
	return 0;
}

/* Pages in the folio. */
static __always_inline __u64 folio_pages(struct folio *folio)
{
	return 1ull << (folio_order(folio) & 31);
}

/* The run's entry for the file of inode, with its key; NULL for a file
 * the run did not touch. */
static __always_inline struct file_stats *run_file(struct inode *inode, struct file_key *key)
{
	key->dev = inode->i_sb->s_dev;
	key->gen = inode->i_generation;
	key->ino = inode->i_ino;
	return bpf_map_lookup_elem(&files, key);
}

/* Inserts init at key in a map where the key was missing, and returns the
 * entry: another CPU's insertion in between is as good; a full map loses
 * the pages. */
static __always_inline void *insert_missing(void *map, const void *key, const void *init)
{
	if (bpf_map_update_elem(map, key, init, BPF_NOEXIST) && !bpf_map_lookup_elem(map, key)) {
		count_lost(LOST_PAGES);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

/* One block of mark_evicted (unrolled, on_delete was 7,600 instructions
 * to verify at every start). */
static long evict_block(__u64 i, struct block_walk *c)
{
	__u64 m = 0;
	long step = walk_block(i, c, &m);
	if (step <= 0)
		return step < 0;
	struct run_block *rb = bpf_map_lookup_elem(&run_pages, &c->bk);
	if (rb)
		rb->evicted |= rb->inserted & m;
	return 0;
}

/* Sets the evicted bits of pages [lo, hi] the run inserted (block 0's
 * in the file's entry fs). Global: checked once. */
__noinline int mark_evicted(struct file_key *key, struct file_stats *fs, __u64 lo, __u64 hi)
{
	if (!key || !fs)
		return 0;
	if (lo < RUN_PAGES_BLOCK) {
		fs->blk0_evicted |= fs->blk0_inserted & block_mask(0, lo, hi);
		if (hi < RUN_PAGES_BLOCK)
			return 0;
	}
	struct block_walk c = {};
	start_walk(&c, key, lo, hi);
	bpf_loop(MAX_FOLIO_BLOCKS, evict_block, &c, 0);
	return 0;
}

SEC("tp_btf/mm_filemap_delete_from_page_cache")
int BPF_PROG(on_delete, struct folio *folio_arg)
{
	struct folio *folio = BTF_VIEW(folio_arg, struct folio);
	struct file_key key = {};
	struct file_stats *fs = run_file(folio->mapping->host, &key);
	if (!fs)
		return 0;
	__u64 n = folio_pages(folio);
	__sync_fetch_and_add(&fs->evicted, n);
	mark_evicted(&key, fs, folio->index, folio->index + n - 1);

	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = bpf_get_current_pid_tgid();
	struct evict_key ek = {};
	ek.dev = key.dev;
	ek.gen = key.gen;
	ek.ino = key.ino;
	ek.tgid = id >> 32;
	ek.nr = -1;
	__u32 tid = (__u32)id;
	__u32 *rk = bpf_map_lookup_elem(&reclaiming, &tid);
	__u32 flags = task->flags;
	if (flags & PF_KSWAPD_) {
		ek.kind = EVICT_KSWAPD;
	} else if (rk) {
		ek.kind = *rk;
	} else if (flags & PF_KTHREAD_) {
		ek.kind = is_kdamond(task->comm) ? EVICT_KDAMOND : EVICT_KERNEL;
	} else {
		ek.nr = current_syscall(task);
		ek.kind = ek.nr >= 0 ? EVICT_SYSCALL : EVICT_KERNEL;
	}
	struct evict_stats *es = bpf_map_lookup_elem(&evictors, &ek);
	if (!es) {
		struct evict_stats ne = {};
		bpf_get_current_comm(ne.comm, sizeof(ne.comm));
		es = insert_missing(&evictors, &ek, &ne);
		if (!es)
			return 0;
	}
	__sync_fetch_and_add(&es->pages, n);
	__sync_fetch_and_add(&es->events, 1);
	count_write();
	return 0;
}

/* Set at load time when on_other_insert runs only by tail call from
 * bpf/pagecache's on_add_to_cache, through the slot it takes for threads
 * the run does not track: that program has already looked the thread up,
 * so the slot is the answer and the lookup here is dead code the verifier
 * drops. Unset (attached on its own), the program asks itself. */
const volatile __u32 chained_untracked = 0;

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_other_insert, struct folio *folio_arg)
{
	struct folio *folio = BTF_VIEW(folio_arg, struct folio);
	struct task_struct *task = bpf_get_current_task_btf();
	if (!chained_untracked && task_state(task))
		return 0; /* the run's own: bpf/pagecache */
	struct inode *inode = folio->mapping->host;
	struct file_key key = {};
	struct file_stats *fs = run_file(inode, &key);
	if (!fs)
		return 0;
	/* New data written by someone else is not a read from disk. */
	if (writes_files(current_syscall(task)) || folio->index >= (((__u64)inode->i_size + 4095) >> 12))
		return 0;
	__u64 n = folio_pages(folio);
	__sync_fetch_and_add(&fs->others_inserted, n);
	fs->other_ins_ts = bpf_ktime_get_ns();
	struct inserter_key ik = {};
	ik.dev = key.dev;
	ik.gen = key.gen;
	ik.ino = key.ino;
	ik.tgid = bpf_get_current_pid_tgid() >> 32;
	struct inserter_stats *is = bpf_map_lookup_elem(&inserters, &ik);
	if (!is) {
		struct inserter_stats ni = {};
		bpf_get_current_comm(ni.comm, sizeof(ni.comm));
		is = insert_missing(&inserters, &ik, &ni);
		if (!is)
			return 0;
	}
	__sync_fetch_and_add(&is->pages, n);
	count_write();
	return 0;
}
