//go:build ignore

/* coldtrace's network probes: bytes received per TCP connection that a
 * tracked thread opened (connect, not accept), and the files the
 * receiving thread writes meanwhile, so user space can tell a download
 * into a model cache from RPC chatter.
 *
 * Everything is aggregated here: one hash entry per connection, updated
 * by every receive and send; a connection reaches the ring buffer once, when it
 * closes (the socket's memory, and so its key, may then be reused).
 * Connections still open at the end are read from the map.
 *
 * The tracked set (task_states) and the thread slots (threads) are the
 * core object's, given at load time as map replacements; drops are
 * counted in this object's own lost counters. Tracepoints only: kprobes
 * and fentry are not available on the kernels this was built for. */

#include "common.h"
#include "syscall64.h"
#include "table_writes.h"
#include "pywalk.h"
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_CONNS 16384
#define MAX_WRITES 4096
#define HOST_LEN 256
#define MAX_ADDRS 8

#define AF_INET_ 2
#define AF_INET6_ 10
#define IPPROTO_TCP_ 6
#define MSG_PEEK_ 2

/* What this object could not record, counted in its own per-CPU array
 * (net_lost): the shared lost_kind indexes the core's kinds of loss,
 * which are not these. Exported to Go by bpf2go (-type dl_lost). */
enum dl_lost {
	DL_RINGBUF = 0, /* a closed connection not reported */
	DL_CONNS = 1,   /* a connection not tracked: table full */
	DL_WRITES = 2,  /* a written file not linked: table full */
	DL_KINDS = 3,
};

/* One TCP connection a tracked thread opened. Keyed by the socket's
 * address; id (the connect time) tells apart connections that reuse a
 * socket's memory. */
struct conn {
	__u64 sk;
	__u64 id;         /* bpf_ktime_get_ns() at connect */
	__u32 tgid;       /* process that connected */
	__u32 tid;        /* thread that connected */
	__u32 rx_tid;     /* thread of the latest receive */
	__u16 family;     /* AF_INET or AF_INET6 */
	__u16 dport;      /* peer port, host order */
	__u8 daddr[16];   /* peer address, network order; 4 bytes for AF_INET */
	__u64 established_ts;
	__u64 first_ts;   /* first byte received (the first receive's return) */
	__u64 last_ts;    /* latest byte received (TCP's stamp, to the microsecond) */
	__u64 bytes;
	__u64 recvs;      /* receive calls that returned data */
	__u64 sent;       /* bytes sent (TCP's count, at the latest receive): a download's requests are tiny */
	__u32 rx_threads; /* times the receiving thread changed */
	__u32 closed;     /* reported at close (ring buffer) */
	__u64 end_ts;     /* closed (0: still open) */
	/* The getaddrinfo call that named the peer: its entry and return. */
	__u64 gai_start;
	__u64 gai_end;
	char host[HOST_LEN]; /* the peer's name (host_from), or "" */
	/* Where host came from (enum host_from). */
	__u32 host_from;
	__u32 rx_slot;    /* rx_tid's rx_slots index */
	/* 1 while the connection, opened without a name, awaits its first
	 * send (counted in unnamed_pending); whoever takes it 1 -> 0 with an
	 * atomic add settles it, the others only push it below 0. */
	__s64 await_name;
	/* The Python stack of the connecting thread (bpf/include/pywalk.h),
	 * 0 for none: a download's line in the program that fetched it. A
	 * connection reused for later requests keeps its first one's. */
	__u64 stack;
};

/* Where a connection's host name came from. Exported to Go by bpf2go
 * (-type host_from). */
enum host_from {
	HOST_NONE = 0,
	HOST_LOOKUP = 1, /* the process's getaddrinfo that returned the peer */
	HOST_TLS_SNI = 2, /* the server name of its TLS ClientHello */
	HOST_HTTP = 3,    /* the Host header of its plain-HTTP request */
};

/* A new connection is made here, not on the stack: with its whole host
 * name it is too large for the stack beside the Python stack walk. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct conn);
} conn_scratch SEC(".maps");

/* A connection that received nothing this long after it was established
 * is reported at close even with no byte: "waiting on HOST, nothing
 * received" (user space applies the same floor). */
#define SILENT_NS (10ull * 1000 * 1000 * 1000)

/* The latest connection a thread received on, by thread slot (the
 * core's): what the page-cache hook links a written file to, and the
 * receives of that thread on it not yet folded into the connection's
 * entry (fold_rx): a thread that goes on receiving on one connection
 * counts here, in an array element, without the hash lookup of its
 * entry. User space adds the counts it finds here for a connection (the
 * slot named by conn.rx_slot, when it holds that connection) to the
 * entry's. */
struct rx_slot {
	__u32 tid;
	__u32 pad;
	__u64 sk;
	__u64 id;
	__u64 last_ts; /* the latest receive (TCP's stamp) */
	__u64 bytes;   /* received, not yet folded */
	__u64 recvs;   /* receive calls, not yet folded */
	__u64 sent;    /* the socket's bytes sent, at the latest receive */
};

/* A file first written this long after the thread's latest receive is
 * not linked (nor does it take a table entry): "meanwhile", as user space
 * also reads it. */
#define WRITE_SLACK_NS (1000ull * 1000 * 1000)

/* A file written by a thread whose latest receive was on connection
 * (sk, id). */
struct write_key {
	__u64 sk;
	__u64 id;
	__u32 dev; /* super_block s_dev, kernel encoding major<<20|minor */
	/* i_generation: a file given a deleted one's inode number (a retried
	 * download's new ".incomplete") is another file. */
	__u32 gen;
	__u64 ino;
};

struct write_stats {
	__u64 pages;    /* pages the writes added to the page cache */
	__u64 first_ts;
	__u64 last_ts;
	__u32 tid;
	__u32 tgid;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_CONNS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct conn);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct rx_slot);
} rx_slots SEC(".maps");

/* A tracked connection, in its socket's own storage: a socket no tracked
 * thread connected has none, and its receives end at that test (a
 * cached pointer in the socket) instead of a hash lookup by the socket's
 * address, some 25 ns each: all that a traced server's accepted
 * connections pay. The latest receiving thread and its slot let that
 * thread's next receive count in the slot without the entry. */
struct conn_rx {
	__u64 id;      /* conn.id; 0 once it closed */
	__u32 rx_tid;  /* the thread of the latest receive */
	__u32 rx_slot; /* its rx_slots index */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct conn_rx);
} conn_rxs SEC(".maps");

/* Moves the receives counted in slot r into c, when r holds c's; each
 * count taken by an exchange, so a receive that adds to r meanwhile is
 * either moved or left for the next fold, never lost or moved twice. */
static __always_inline void fold_rx(struct conn *c, struct rx_slot *r)
{
	if (!r || r->sk != c->sk || r->id != c->id)
		return;
	__u64 bytes = __sync_lock_test_and_set(&r->bytes, 0);
	__u64 recvs = __sync_lock_test_and_set(&r->recvs, 0);
	__sync_fetch_and_add(&c->bytes, bytes);
	__sync_fetch_and_add(&c->recvs, recvs);
	if (r->last_ts > c->last_ts)
		c->last_ts = r->last_ts;
	if (r->sent > c->sent)
		c->sent = r->sent;
}

/* Folds the receives of c's latest receiving thread into c. */
static __always_inline void fold_latest(struct conn *c)
{
	if (!c->rx_tid)
		return;
	__u32 slot = c->rx_slot;
	fold_rx(c, bpf_map_lookup_elem(&rx_slots, &slot));
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WRITES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct write_key);
	__type(value, struct write_stats);
} writes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DL_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} net_lost SEC(".maps");

static __always_inline void count_net_lost(enum dl_lost kind)
{
	__u32 k = kind;
	__u64 *v = bpf_map_lookup_elem(&net_lost, &k);
	if (v)
		*v += 1;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
	__type(value, struct conn); /* names the type for bpf2go */
} closed_conns SEC(".maps");

/* How many tracked connections are in conns now. User space's watcher of
 * receiving processes looks every few milliseconds only while one is
 * (a tick every 10 ms for the whole run cost some 400 thread switches a
 * second, the runtime's monitor thread's included, to runs that never
 * opened one); the connection that makes the count 1 wakes it through
 * conn_wake. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} open_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} conn_wake SEC(".maps");

/* A connection went into conns (+1) or out of it (-1). The wake-up's
 * record says nothing but that it happened. */
static __always_inline void count_open(__s64 d)
{
	__u32 zero = 0;
	__s64 *n = bpf_map_lookup_elem(&open_conns, &zero);
	if (n && __sync_fetch_and_add(n, d) == 0 && d > 0)
		bpf_ringbuf_output(&conn_wake, &zero, sizeof(zero), BPF_RB_FORCE_WAKEUP);
}

/* Host names: getaddrinfo(3) in libc, probed at its entry and return in
 * tracked threads. A process's latest lookup is kept with the addresses
 * it returned; a connection it then opens to one of them is named by it.
 * Programs that resolve without libc (Go's own resolver) or through a
 * libc other than the one probed (a container's) go unnamed. */

struct gai_call {
	__u64 node; /* const char *, the name */
	__u64 res;  /* struct addrinfo **, the answer */
	__u64 ts;   /* entry */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tid */
	__type(value, struct gai_call);
} gai_calls SEC(".maps");

/* A process's latest lookup: the name, empty when it was an address
 * given as text, and the addresses (IPv4 in the first 4 bytes). */
struct lookup {
	__u64 start_ts; /* the call's entry and return: a slow resolver */
	__u64 end_ts;
	char name[HOST_LEN];
	__u32 n;
	__u16 family[MAX_ADDRS];
	__u8 addr[MAX_ADDRS][16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tgid */
	__type(value, struct lookup);
} lookups SEC(".maps");

/* Too big for the BPF stack next to the addrinfo being read. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lookup);
} lookup_scratch SEC(".maps");

/* glibc's struct addrinfo, x86_64. */
struct addrinfo_ {
	int ai_flags;
	int ai_family;
	int ai_socktype;
	int ai_protocol;
	__u32 ai_addrlen;
	__u32 pad;
	__u64 ai_addr;
	__u64 ai_canonname;
	__u64 ai_next;
};

/* A numeric "name" (an address given as text) names nothing. A walk by
 * bpf_loop: the verifier checks one byte's step, not HOST_LEN of them. */
struct numeric_scan {
	const char *name;
	__u32 numeric;
};

static long numeric_byte(__u64 i, void *ctx)
{
	struct numeric_scan *s = ctx;
	char c = s->name[i & (HOST_LEN - 1)];
	if (c == 0)
		return 1;
	if (c == ':')
		return 1; /* an IPv6 address */
	if (c != '.' && (c < '0' || c > '9')) {
		s->numeric = 0;
		return 1;
	}
	return 0;
}

static __always_inline bool numeric_host(const char *name)
{
	struct numeric_scan s = {.name = name, .numeric = 1};
	bpf_loop(HOST_LEN, numeric_byte, &s, 0);
	return s.numeric;
}

SEC("uprobe")
int BPF_KPROBE(on_getaddrinfo, const char *node, const char *service, const void *hints, void **res)
{
	if (!node || !current_state())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct gai_call c = {.node = (__u64)node, .res = (__u64)res, .ts = bpf_ktime_get_ns()};
	bpf_map_update_elem(&gai_calls, &tid, &c, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_gai_return, int ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32;
	struct gai_call *c = bpf_map_lookup_elem(&gai_calls, &tid);
	if (!c)
		return 0;
	struct gai_call call = *c;
	bpf_map_delete_elem(&gai_calls, &tid);
	if (ret != 0)
		return 0;
	__u32 zero = 0;
	struct lookup *l = bpf_map_lookup_elem(&lookup_scratch, &zero);
	if (!l)
		return 0;
	__builtin_memset(l, 0, sizeof(*l));
	l->start_ts = call.ts;
	l->end_ts = bpf_ktime_get_ns();
	long n = bpf_probe_read_user_str(l->name, sizeof(l->name), (void *)call.node);
	char past = 0;
	/* A name that filled the buffer may go on past it: a cut name would
	 * name another host, so none is kept (as for first-send names). */
	if (n == sizeof(l->name))
		bpf_probe_read_user(&past, 1, (void *)(call.node + sizeof(l->name) - 1));
	if (n <= 1 || past || numeric_host(l->name))
		l->name[0] = 0;
	__u64 ai = 0;
	if (bpf_probe_read_user(&ai, sizeof(ai), (void *)call.res))
		return 0;
	for (int i = 0; i < MAX_ADDRS && ai; i++) {
		struct addrinfo_ a;
		if (bpf_probe_read_user(&a, sizeof(a), (void *)ai))
			break;
		ai = a.ai_next;
		__u32 j = l->n;
		if (j >= MAX_ADDRS)
			break;
		if (a.ai_family == AF_INET_) {
			if (bpf_probe_read_user(l->addr[j], 4, (void *)(a.ai_addr + 4))) /* sin_addr */
				continue;
		} else if (a.ai_family == AF_INET6_) {
			if (bpf_probe_read_user(l->addr[j], 16, (void *)(a.ai_addr + 8))) /* sin6_addr */
				continue;
		} else {
			continue;
		}
		l->family[j] = a.ai_family;
		l->n = j + 1;
	}
	bpf_map_update_elem(&lookups, &tgid, l, BPF_ANY);
	return 0;
}

/* Names conn's peer by the process's latest lookup, when that returned
 * the peer's address. */
static __always_inline void name_peer(struct conn *c)
{
	struct lookup *l = bpf_map_lookup_elem(&lookups, &c->tgid);
	if (!l || !l->name[0])
		return;
	for (int i = 0; i < MAX_ADDRS; i++) {
		if (i >= l->n)
			return;
		if (l->family[i] != c->family)
			continue;
		__u64 *a = (__u64 *)l->addr[i], *b = (__u64 *)c->daddr;
		if (a[0] == b[0] && a[1] == b[1]) {
			__builtin_memcpy(c->host, l->name, HOST_LEN);
			c->gai_start = l->start_ts;
			c->gai_end = l->end_ts;
			return;
		}
	}
}

/* Connections a tracked thread opened without a name (no lookup of its
 * process returned the peer) whose first send has not been seen: while
 * there are none, on_send returns at its first load. */
__s64 unnamed_pending = 0;

/* c no longer awaits its first send (it was seen, or c is going away);
 * true the first time only. */
static __always_inline bool name_settled(struct conn *c)
{
	if (__sync_fetch_and_add(&c->await_name, -1) != 1)
		return false;
	__sync_fetch_and_add(&unnamed_pending, -1);
	return true;
}

/* Report a connection that is going away, unless it never received
 * (and was not left waiting for SILENT_NS). */
static __always_inline void report_closed(struct conn *c)
{
	c->end_ts = bpf_ktime_get_ns();
	if (!c->bytes && (!c->established_ts || c->end_ts - c->established_ts < SILENT_NS))
		return;
	c->closed = 1;
	/* One event per connection: wake the reader only when it is filling. */
	if (bpf_ringbuf_output(&closed_conns, c, sizeof(*c), ring_wakeup(&closed_conns)))
		count_net_lost(DL_RINGBUF);
}

/* The bytes the socket sent, from TCP's own count (retransmissions
 * included): what tells a download (a small request, a large answer) from
 * a conversation whatever the client's buffer sizes (TLS reads a record's
 * 5-byte header apart from its body). A probe on every send cost a 64-byte
 * ping-pong a quarter of a microsecond per message; this is one load at
 * each receive and at the close. */
static __always_inline __u64 sent_bytes(const struct sock *sk)
{
	struct tcp_sock *tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	return tp->bytes_sent;
}

/* inet_sock_set_state: CLOSE -> SYN_SENT runs in the connecting thread
 * (in connect(2), blocking or not), so the tracked check there is what
 * keeps accepted connections out: they never pass SYN_SENT. The other
 * transitions may run in softirq context, in any task. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(on_sock_state, const struct sock *sk_arg, const int oldstate, const int newstate)
{
	struct sock *sk = BTF_VIEW(sk_arg, struct sock);
	if (sk->sk_protocol != IPPROTO_TCP_)
		return 0;
	__u64 key = (__u64)sk;
	if (newstate == TCP_SYN_SENT) {
		struct tstate *s = current_state();
		if (!s)
			return 0;
		__u16 family = sk->__sk_common.skc_family;
		if (family != AF_INET_ && family != AF_INET6_)
			return 0;
		struct conn *old = bpf_map_lookup_elem(&conns, &key);
		if (old) {
			fold_latest(old);
			report_closed(old);
		}
		__u64 pid_tgid = bpf_get_current_pid_tgid();
		__u32 zero = 0;
		struct conn *n = bpf_map_lookup_elem(&conn_scratch, &zero);
		if (!n)
			return 0;
		__builtin_memset(n, 0, sizeof(*n));
		n->sk = key;
		n->id = bpf_ktime_get_ns();
		n->tgid = pid_tgid >> 32;
		n->tid = (__u32)pid_tgid;
		n->family = family;
		n->dport = bpf_ntohs(sk->__sk_common.skc_dport);
		if (family == AF_INET_)
			__builtin_memcpy(n->daddr, &sk->__sk_common.skc_daddr, 4);
		else
			__builtin_memcpy(n->daddr, &sk->__sk_common.skc_v6_daddr, 16);
		name_peer(n);
		if (n->host[0])
			n->host_from = HOST_LOOKUP;
		else
			n->await_name = 1;
		n->stack = py_stack_or_leaf();
		if (old)
			name_settled(old);
		if (bpf_map_update_elem(&conns, &key, n, BPF_ANY)) {
			count_net_lost(DL_CONNS);
		} else {
			struct conn_rx *x = bpf_sk_storage_get(&conn_rxs, (struct sock *)sk_arg, 0,
							       BPF_SK_STORAGE_GET_F_CREATE);
			if (x) {
				x->rx_tid = 0;
				x->rx_slot = 0;
				x->id = n->id;
			} else {
				count_net_lost(DL_CONNS);
			}
			if (!old)
				count_open(1);
			if (n->await_name)
				__sync_fetch_and_add(&unnamed_pending, 1);
		}
		count_write();
		return 0;
	}
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c)
		return 0;
	if (newstate == TCP_ESTABLISHED && !c->established_ts) {
		c->established_ts = bpf_ktime_get_ns();
		count_write();
	} else if (newstate == TCP_CLOSE) {
		struct conn_rx *x = bpf_sk_storage_get(&conn_rxs, (struct sock *)sk_arg, 0, 0);
		if (x)
			x->id = 0;
		fold_latest(c);
		c->sent = sent_bytes(sk);
		name_settled(c);
		report_closed(c);
		if (bpf_map_delete_elem(&conns, &key) == 0)
			count_open(-1);
		count_write();
	}
	return 0;
}

/* Names from the first bytes a connection sends, for one that no lookup
 * named (a child that resolved before its own probe existed, a resolver
 * other than libc's, an address given to curl with --resolve, "localhost"
 * from /etc/hosts without a call): the server name of a TLS ClientHello,
 * which every TLS client sends in clear to reach a virtual host, or the
 * Host header of a plain-HTTP request. Only the name is kept: nothing
 * else of the request (paths, queries, tokens) is read past the scan. */
#define PEEK_LEN 4096 /* a ClientHello with a post-quantum key share is ~1.5 KiB */
#define PEEK_MASK (PEEK_LEN - 1)
#define HTTP_SCAN 1024 /* where a request's Host header may be */
#define TLS_EXTS 48    /* extensions walked looking for server_name */

struct peek {
	__u8 b[PEEK_LEN];
	char out[HOST_LEN]; /* the name taken, lower case */
	__u32 len;          /* bytes in b */
	__u32 pos;          /* the extensions' walk: where it is */
	__u32 end;          /* and where they end */
	__u32 name;         /* where the name starts in b; 0: none found */
	__u32 name_len;     /* its length (TLS); HTTP's ends at a delimiter */
	__u32 from;         /* enum host_from */
	__u32 n_out;        /* bytes in out */
	__u32 bad;          /* the name has a byte no host name has, or is too long */
	__u32 letters;      /* bytes of it that are not digits or dots */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct peek);
} peeks SEC(".maps");

/* bpf_loop's context must be on the stack: it carries the scratch. */
struct peek_ctx {
	struct peek *p;
};

static __always_inline __u32 peek_u8(struct peek *p, __u32 at)
{
	return p->b[at & PEEK_MASK];
}

static __always_inline __u32 peek_u16(struct peek *p, __u32 at)
{
	return peek_u8(p, at) << 8 | peek_u8(p, at + 1);
}

/* One extension of a ClientHello (bpf_loop callback): at server_name,
 * its first name (type 0: host_name) is the name. */
static long tls_ext(__u64 i, void *ctx)
{
	struct peek *p = ((struct peek_ctx *)ctx)->p;
	__u32 at = p->pos;
	if (at + 4 > p->end)
		return 1;
	__u32 type = peek_u16(p, at), len = peek_u16(p, at + 2);
	at += 4;
	if (type == 0) {
		/* server_name_list length (2), name type (1), name length (2) */
		if (len < 5 || at + 5 > p->end || peek_u8(p, at + 2) != 0)
			return 1;
		__u32 n = peek_u16(p, at + 3);
		if (at + 5 + n <= p->end && n > 0) {
			p->name = at + 5;
			p->name_len = n;
			p->from = HOST_TLS_SNI;
		}
		return 1;
	}
	p->pos = at + len;
	return 0;
}

/* A TLS record holding a ClientHello: record header (5), handshake
 * header (4), version (2), random (32), session id, cipher suites,
 * compression methods, then the extensions. */
static __always_inline void parse_client_hello(struct peek *p)
{
	if (p->len < 48 || peek_u8(p, 0) != 0x16 || peek_u8(p, 1) != 3 || peek_u8(p, 5) != 1)
		return;
	__u32 at = 43;
	at += 1 + peek_u8(p, at);     /* session id */
	at += 2 + peek_u16(p, at);    /* cipher suites */
	at += 1 + peek_u8(p, at);     /* compression methods */
	if (at + 2 > p->len)
		return;
	__u32 end = at + 2 + peek_u16(p, at);
	p->pos = at + 2;
	p->end = end < p->len ? end : p->len;
	struct peek_ctx pc = {.p = p};
	bpf_loop(TLS_EXTS, tls_ext, &pc, 0);
}

static __always_inline __u32 lower(__u32 c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* One byte of a request's head (bpf_loop callback): a line that starts
 * "Host:" (any case) gives the name after its spaces; the blank line
 * that ends the head ends the scan. */
static long http_byte(__u64 i, void *ctx)
{
	struct peek *p = ((struct peek_ctx *)ctx)->p;
	__u32 at = i;
	if (at + 7 > p->len)
		return 1;
	if (peek_u8(p, at) != '\n')
		return 0;
	if (peek_u8(p, at + 1) == '\r' || peek_u8(p, at + 1) == '\n')
		return 1;
	if (lower(peek_u8(p, at + 1)) != 'h' || lower(peek_u8(p, at + 2)) != 'o' || lower(peek_u8(p, at + 3)) != 's' ||
	    lower(peek_u8(p, at + 4)) != 't' || peek_u8(p, at + 5) != ':')
		return 0;
	at += 6;
	for (int k = 0; k < 8 && at < p->len && (peek_u8(p, at) == ' ' || peek_u8(p, at) == '\t'); k++)
		at++;
	p->name = at;
	p->from = HOST_HTTP;
	return 1;
}

/* A request line starts with a method: capital letters, then a space. */
static __always_inline bool http_request(struct peek *p)
{
	int k = 0;
	for (; k < 8; k++) {
		__u32 c = peek_u8(p, k);
		if (c == ' ')
			break;
		if (c < 'A' || c > 'Z')
			return false;
	}
	return k >= 3 && k < 8;
}

/* One byte of the name (bpf_loop callback), up to its length (TLS) or a
 * delimiter (HTTP: the port's colon, the line's end, a space). */
static long name_byte(__u64 i, void *ctx)
{
	struct peek *p = ((struct peek_ctx *)ctx)->p;
	__u32 at = p->name + i;
	__u32 c;
	if (p->from == HOST_HTTP) {
		if (at >= p->len)
			return 1;
		c = peek_u8(p, at);
		if (c == ':' || c == '\r' || c == '\n' || c == ' ')
			return 1;
	} else {
		if (i >= p->name_len || at >= p->len)
			return 1;
		c = peek_u8(p, at);
	}
	if (i >= HOST_LEN - 1) {
		p->bad = 1; /* a cut name would name another host */
		return 1;
	}
	c = lower(c);
	bool letter = c >= 'a' && c <= 'z';
	bool digit = c >= '0' && c <= '9';
	if (!letter && !digit && c != '.' && c != '-' && c != '_') {
		p->bad = 1;
		return 1;
	}
	if (!digit && c != '.')
		p->letters++;
	p->out[i & (HOST_LEN - 1)] = c;
	p->n_out = i + 1;
	return 0;
}

/* Copies p's name into host if every byte of it is one a host name has
 * (letters, digits, '.', '-', '_'; lower-cased), it is shorter than
 * HOST_LEN and not an address; else leaves host alone. */
static __always_inline void take_name(struct peek *p, char *host)
{
	if (!p->name)
		return;
	__builtin_memset(p->out, 0, HOST_LEN);
	p->n_out = 0;
	p->bad = 0;
	p->letters = 0;
	struct peek_ctx pc = {.p = p};
	bpf_loop(HOST_LEN, name_byte, &pc, 0);
	__u32 n = p->n_out;
	if (p->bad || !p->letters || n == 0 || n >= HOST_LEN)
		return;
	p->out[n & (HOST_LEN - 1)] = 0;
	__builtin_memcpy(host, p->out, HOST_LEN);
}

/* The start and length of the data msg holds for this send: a plain
 * buffer (send, write) or the first of an iovec's (sendmsg, writev). */
static __always_inline __u64 send_data(const struct msghdr *msg, __u64 *len)
{
	const struct iov_iter *it = &msg->msg_iter;
	__u8 type = it->iter_type;
	__u64 off = it->iov_offset;
	if (type == bpf_core_enum_value(enum iter_type, ITER_UBUF)) {
		*len = it->count;
		return (__u64)it->ubuf + off;
	}
	if (type != bpf_core_enum_value(enum iter_type, ITER_IOVEC) || !it->nr_segs)
		return 0;
	const struct iovec *iov = it->__iov;
	__u64 n = iov->iov_len;
	if (off >= n)
		return 0;
	*len = n - off;
	return (__u64)iov->iov_base + off;
}

/* Each TCP send's copy loop, in the sending thread; for every process of
 * the machine, so the first load decides: while no tracked connection
 * awaits its first send (almost always), nothing else runs. A
 * connection's first send is read for a name once, whatever it finds. */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(on_send, const struct sock *sk, const struct msghdr *msg_arg, const struct sk_buff *skb, int size_goal)
{
	if (!unnamed_pending)
		return 0;
	__u64 key = (__u64)sk;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c || c->await_name <= 0 || !name_settled(c))
		return 0;
	const struct msghdr *msg = BTF_VIEW(msg_arg, struct msghdr);
	__u32 zero = 0;
	struct peek *p = bpf_map_lookup_elem(&peeks, &zero);
	if (!p)
		return 0;
	__u64 len = 0;
	__u64 data = send_data(msg, &len);
	if (!data || !len)
		return 0;
	__u32 n = len < PEEK_LEN ? len : PEEK_LEN;
	if (bpf_probe_read_user(p->b, n, (void *)data))
		return 0;
	p->len = n;
	p->name = 0;
	p->name_len = 0;
	p->from = HOST_NONE;
	if (peek_u8(p, 0) == 0x16)
		parse_client_hello(p);
	else if (http_request(p)) {
		struct peek_ctx pc = {.p = p};
		bpf_loop(n < HTTP_SCAN ? n : HTTP_SCAN, http_byte, &pc, 0);
	}
	take_name(p, c->host);
	if (c->host[0])
		c->host_from = p->from;
	count_write();
	return 0;
}

/* A receive on x's connection by a thread whose slot does not hold it:
 * another thread, or this one back from another connection. Counted
 * when the thread is tracked, as the connection's opener was. The slot's
 * receives for the connection it held go to that connection, those of
 * the connection's previous receiving thread to this one, and the slot
 * holds this connection from now on. */
static __always_inline struct rx_slot *take_slot(struct conn_rx *x, __u64 key, __u32 tid)
{
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c || c->id != x->id)
		return NULL;
	struct tstate *s = current_state();
	if (!s)
		return NULL;
	__u32 slot = s->slot;
	struct rx_slot *r = bpf_map_lookup_elem(&rx_slots, &slot);
	if (!r)
		return NULL;
	if (r->sk && (r->sk != key || r->id != c->id)) {
		__u64 held = r->sk;
		struct conn *other = bpf_map_lookup_elem(&conns, &held);
		if (other)
			fold_rx(other, r);
		/* Whatever is left belongs to a connection that closed (its
		 * close folded what it found) */
		r->bytes = 0;
		r->recvs = 0;
	}
	if (c->rx_tid != tid) {
		if (c->rx_tid) {
			fold_latest(c);
			c->rx_threads++;
		}
		c->rx_tid = tid;
	}
	if (!c->first_ts) {
		/* Once a connection: the first receive's time, to the
		 * nanosecond, never before the connection was established. */
		c->first_ts = bpf_ktime_get_ns();
		c->last_ts = c->first_ts;
	}
	c->rx_slot = slot;
	r->tid = tid;
	r->sk = key;
	r->id = c->id;
	r->last_ts = c->last_ts;
	x->rx_tid = tid;
	x->rx_slot = slot;
	return r;
}

/* Only TCP sockets can be in conns: a tracked thread's unix sockets and
 * UDP skip the hash lookup. */
static __always_inline bool tcp_sock(struct sock *sk)
{
	return sk->sk_protocol == IPPROTO_TCP_ && sk->sk_type == 1 /* SOCK_STREAM */;
}

/* Every recvmsg/read on any socket, in the receiving thread. A socket
 * no tracked thread connected costs two loads and its storage's test; a
 * thread that received on the same connection last counts in its slot
 * (rx_slot). The latest byte's time is TCP's stamp of the socket's
 * latest packet (tcp_mstamp: microseconds, the same clock), not a clock
 * read (some 30 ns a message here): the arrival of the bytes this
 * receive returns or later, never after the receive. */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_recv, struct sock *sk_arg, int ret, int flags)
{
	struct sock *sk = BTF_VIEW(sk_arg, struct sock);
	/* No storage of any map (almost every socket): no helper call. */
	if (ret <= 0 || (flags & MSG_PEEK_) || !sk->sk_bpf_storage || !tcp_sock(sk))
		return 0;
	struct conn_rx *x = bpf_sk_storage_get(&conn_rxs, sk_arg, 0, 0);
	if (!x || !x->id)
		return 0;
	__u64 key = (__u64)sk;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct rx_slot *r = NULL;
	if (x->rx_tid == tid) {
		__u32 slot = x->rx_slot;
		r = bpf_map_lookup_elem(&rx_slots, &slot);
		if (r && (r->tid != tid || r->sk != key || r->id != x->id))
			r = NULL; /* it received on another connection since */
	}
	if (!r) {
		r = take_slot(x, key, tid);
		if (!r)
			return 0;
	}
	struct tcp_sock *tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	__sync_fetch_and_add(&r->bytes, ret);
	__sync_fetch_and_add(&r->recvs, 1);
	__u64 stamp = tp->tcp_mstamp * 1000;
	if (stamp > r->last_ts)
		r->last_ts = stamp;
	r->sent = tp->bytes_sent;
	count_write();
	return 0;
}

/* Whether task is in a syscall that writes file data. The same list as
 * files.h's writes_files, which comes with the page-cache object's file
 * map; the numbers come from the shared syscall64.h. */
static __always_inline bool writing(struct task_struct *task)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || (long)regs->ax != -ENOSYS_)
		return false;
	switch (regs->orig_ax) {
	case NR_write:
	case NR_pwrite64:
	case NR_writev:
	case NR_fallocate:
	case NR_pwritev:
	case NR_pwritev2:
		return true;
	}
	return false;
}

/* The connection the current thread received on last, when this thread
 * (not the slot's earlier owner) did. */
static __always_inline struct rx_slot *current_rx(struct tstate *s, __u32 tid)
{
	__u32 slot = s->slot;
	struct rx_slot *r = bpf_map_lookup_elem(&rx_slots, &slot);
	if (!r || !r->sk || r->tid != tid)
		return NULL;
	return r;
}

/* Counts the pages (the page cache's insertions) the current thread wrote
 * to inode, against the connection it received on last. */
static __always_inline void link_write(struct rx_slot *r, struct inode *inode, __u64 pages)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();
	struct write_key key = {};
	key.sk = r->sk;
	key.id = r->id;
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.gen = BPF_CORE_READ(inode, i_generation);
	struct write_stats *w = bpf_map_lookup_elem(&writes, &key);
	if (!w) {
		/* A file starts to be linked only near a receive; once linked,
		 * all of its writing counts (a body kept in memory, written out
		 * at the end, may take a while). */
		if (now - r->last_ts > WRITE_SLACK_NS)
			return;
		struct write_stats nw = {};
		nw.first_ts = now;
		nw.tid = (__u32)pid_tgid;
		nw.tgid = pid_tgid >> 32;
		if (bpf_map_update_elem(&writes, &key, &nw, BPF_NOEXIST) && !bpf_map_lookup_elem(&writes, &key)) {
			count_net_lost(DL_WRITES);
			return;
		}
		w = bpf_map_lookup_elem(&writes, &key);
		if (!w)
			return;
	}
	__sync_fetch_and_add(&w->pages, pages);
	w->last_ts = now;
	count_write();
}

/* A folio inserted by a thread that has received on a tracked
 * connection: when a write put it there (or it lies past the end of the
 * file, which only a write does), the file is linked to that connection. */
SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(on_dl_write, struct folio *folio_arg)
{
	struct folio *folio = BTF_VIEW(folio_arg, struct folio);
	struct tstate *s = current_state();
	if (!s)
		return 0;
	struct rx_slot *r = current_rx(s, (__u32)bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	struct inode *inode = folio->mapping->host;
	if (folio->index < (((__u64)inode->i_size + 4095) >> 12) && !writing(bpf_get_current_task_btf()))
		return 0;
	__u32 order = 0;
	if (folio->flags.f & (1ull << bpf_core_enum_value(enum pageflags, PG_head)))
		order = folio->_flags_1 & 0xff;
	link_write(r, inode, 1ull << (order & 31));
	return 0;
}

/* A download into tmpfs (shmem fills its pages without the page cache's
 * insertion tracepoint) is measured in user space, by the sizes of the
 * tmpfs files the downloading processes have open, poll by poll
 * (trace/download/tmpfs.go): no syscall tracepoint, which would put every
 * task of the machine on the syscall slow path. */

BTF_ANCHOR(enum dl_lost, dl_lost);
BTF_ANCHOR(enum host_from, host_from);
