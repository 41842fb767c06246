/* collateral: the untraced loops of the bench's collateral row: what a
 * process that coldtrace does not trace pays while coldtrace runs.
 *
 *   collateral CPU MODE N [FILE]
 *
 * The loop pins itself to CPU, runs N iterations of MODE and prints one
 * JSON line: its elapsed time over the loop (CLOCK_MONOTONIC) and N.
 *
 * Modes:
 *   getppid      getppid(2): the cheapest system call
 *   pread FILE   a cached 1-byte pread(2) at offset 0
 *   pingpong     a byte passed between two threads over two pipes (both
 *                threads on CPU: every round trip is two switches)
 *   gai          getaddrinfo("localhost") and freeaddrinfo: /etc/hosts,
 *                no network
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static int cpu;

static void pin(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		die("sched_setaffinity");
}

struct pong {
	int in, out;
	long n;
};

static void *ponger(void *arg)
{
	struct pong *p = arg;
	char c;
	pin();
	for (long i = 0; i < p->n; i++) {
		if (read(p->in, &c, 1) != 1 || write(p->out, &c, 1) != 1)
			die("pong");
	}
	return NULL;
}

static void pingpong(long n)
{
	int a[2], b[2];
	if (pipe(a) != 0 || pipe(b) != 0)
		die("pipe");
	struct pong p = {a[0], b[1], n};
	pthread_t t;
	if (pthread_create(&t, NULL, ponger, &p) != 0)
		die("pthread_create");
	char c = 'x';
	for (long i = 0; i < n; i++) {
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			die("ping");
	}
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: collateral CPU MODE N [FILE]\n");
		return 2;
	}
	cpu = atoi(argv[1]);
	const char *mode = argv[2];
	long n = atol(argv[3]);
	pin();
	int fd = -1;
	if (strcmp(mode, "pread") == 0) {
		if (argc < 5 || (fd = open(argv[4], O_RDONLY)) < 0)
			die("open");
		char c;
		if (pread(fd, &c, 1, 0) != 1) /* cached before the clock starts */
			die("pread");
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	uint64_t check = 0;
	int64_t t0 = now_ns();
	if (strcmp(mode, "getppid") == 0) {
		for (long i = 0; i < n; i++)
			check += (uint64_t)syscall(SYS_getppid);
	} else if (strcmp(mode, "pread") == 0) {
		char c;
		for (long i = 0; i < n; i++)
			check += (uint64_t)pread(fd, &c, 1, 0);
	} else if (strcmp(mode, "pingpong") == 0) {
		pingpong(n);
	} else if (strcmp(mode, "gai") == 0) {
		for (long i = 0; i < n; i++) {
			struct addrinfo *res;
			if (getaddrinfo("localhost", NULL, &hints, &res) != 0)
				die("getaddrinfo localhost");
			check += res->ai_family;
			freeaddrinfo(res);
		}
	} else {
		fprintf(stderr, "collateral: no mode %s\n", mode);
		return 2;
	}
	int64_t t1 = now_ns();
	printf("{\"elapsed_ns\": %lld, \"n\": %ld, \"check\": %llu}\n", (long long)(t1 - t0), n, (unsigned long long)check);
	return 0;
}
