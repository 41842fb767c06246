/* net.c: the network workloads of work.c (included by it, which gives
 * die() and the headers it shares).
 *
 *   tcpstream BYTES   one thread sends BYTES over a loopback TCP connection,
 *                     the other receives them in 256 KiB reads: a download
 *   tcppong N MSG     two threads on one CPU pass MSG bytes back and forth
 *                     over a loopback TCP connection N times (TCP_NODELAY)
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* tcp_pair connects a client socket to a listener on 127.0.0.1 and
 * returns both ends: *client (the connecting side) and *server (the
 * accepted side). */
static void tcp_pair(int *client, int *server)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		die("socket");
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		die("listen on 127.0.0.1");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) < 0)
		die("connect to 127.0.0.1");
	int s = accept(l, NULL, NULL);
	if (s < 0)
		die("accept");
	close(l);
	*client = c;
	*server = s;
}

struct stream_arg {
	int fd;
	uint64_t bytes;
};

static void *stream_sender(void *p)
{
	struct stream_arg *a = p;
	static char buf[256 << 10];
	memset(buf, 'd', sizeof buf);
	for (uint64_t left = a->bytes; left > 0;) {
		size_t n = left < sizeof buf ? left : sizeof buf;
		ssize_t w = write(a->fd, buf, n);
		if (w <= 0)
			die("send");
		left -= (uint64_t)w;
	}
	close(a->fd);
	return NULL;
}

static uint64_t tcpstream(uint64_t bytes)
{
	int c, s;
	tcp_pair(&c, &s);
	struct stream_arg a = {s, bytes};
	pthread_t t;
	if (pthread_create(&t, NULL, stream_sender, &a))
		die("pthread_create");
	static char buf[256 << 10];
	uint64_t got = 0;
	for (;;) {
		ssize_t n = read(c, buf, sizeof buf);
		if (n < 0)
			die("recv");
		if (n == 0)
			break;
		got += (uint64_t)n;
	}
	pthread_join(t, NULL);
	close(c);
	return got;
}

struct pong_arg {
	int fd;
	long rounds;
	size_t msg;
};

static void read_full(int fd, char *b, size_t n)
{
	while (n > 0) {
		ssize_t r = read(fd, b, n);
		if (r <= 0)
			die("recv");
		b += r;
		n -= (size_t)r;
	}
}

static void write_full(int fd, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w <= 0)
			die("send");
		b += w;
		n -= (size_t)w;
	}
}

static void *tcp_ponger(void *p)
{
	struct pong_arg *a = p;
	char buf[4096];
	for (long i = 0; i < a->rounds; i++) {
		read_full(a->fd, buf, a->msg);
		write_full(a->fd, buf, a->msg);
	}
	return NULL;
}

/* pin_last_cpu keeps the process on the last CPU it may use, the same
 * every run (as pingpong does). */
static void pin_last_cpu(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) < 0)
		die("sched_getaffinity");
	int cpu = -1;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			cpu = i;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) < 0)
		die("sched_setaffinity");
}

/* Both threads on one CPU, as pingpong: each hand-over is a direct switch
 * and every message a receive the network probes see. */
static uint64_t tcppong(long n, size_t msg)
{
	if (msg == 0 || msg > 4096)
		die("tcppong: MSG must be 1 to 4096 bytes");
	pin_last_cpu();
	int c, s, one = 1;
	tcp_pair(&c, &s);
	if (setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
	    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
		die("TCP_NODELAY");
	struct pong_arg a = {s, n, msg};
	pthread_t t;
	if (pthread_create(&t, NULL, tcp_ponger, &a))
		die("pthread_create");
	char buf[4096];
	memset(buf, 'p', msg);
	uint64_t got = 0;
	for (long i = 0; i < n; i++) {
		write_full(c, buf, msg);
		read_full(c, buf, msg);
		got += msg;
	}
	pthread_join(t, NULL);
	close(c);
	close(s);
	return got;
}
