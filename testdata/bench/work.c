/* work: the workloads of coldtrace's overhead benchmark (bench/).
 *
 *   work START_AT_NS MODE ARGS...
 *
 * The program sleeps until START_AT_NS on CLOCK_MONOTONIC, so the delay
 * between the harness evicting a file and the workload touching it is the
 * same whether or not coldtrace runs in front (coldtrace's startup happens
 * inside the delay). It then runs MODE and prints one JSON line on stdout:
 * its own elapsed time from START_AT_NS to the end, when main() was entered
 * (to measure launch overhead from outside), a check value that must be the
 * same traced and untraced, and the context switches it made.
 *
 * Modes:
 *   seqread FILE            read FILE start to end, 1 MiB read()s
 *   mmapread FILE ROUNDS    ROUNDS times: mmap FILE, touch one byte per page, unmap
 *   smallfiles DIR N        stat+open+fstat+read+close DIR/dNNN/fNNNNN.dat, N files
 *   forkexec N PROG         fork+exec PROG N times, one after the other
 *   pingpong N              two threads on one CPU pass a byte over two pipes N times
 *   groundtruth FILE MS IT  sleep MS, read FILE, spin IT iterations (phases_ns: the three)
 *   calibrate               spin iterations per second, for groundtruth
 *   mkfiles DIR N           create the small files (setup, not timed)
 *   touch BYTES             write to BYTES of fresh memory (setup, not timed)
 *   tcpstream, tcppong      network workloads: see net.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
	exit(1);
}

static uint64_t switches(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

/* The helper's own CPU time (user + system, all threads), ns. */
static int64_t process_cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static char buf[1 << 20];

static uint64_t seqread(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	uint64_t total = 0;
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		total += (uint64_t)n;
	if (n < 0)
		die("read");
	close(fd);
	return total;
}

/* Each round maps the file afresh, so every round faults the whole file in
 * again through the fault-around path (filemap_map_pages); one round of a
 * warm 1 GiB file takes only some 10 ms. */
static uint64_t mmapread(const char *path, long rounds)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		die("fstat");
	long page = sysconf(_SC_PAGESIZE);
	uint64_t sum = 0;
	for (long r = 0; r < rounds; r++) {
		unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			die("mmap");
		for (off_t off = 0; off < st.st_size; off += page)
			sum += p[off];
		munmap(p, st.st_size);
	}
	close(fd);
	return sum;
}

static void small_path(char *out, size_t n, const char *dir, long i)
{
	snprintf(out, n, "%s/d%03ld/f%05ld.dat", dir, i / 100, i);
}

/* Sizes like a package's modules: 512 B to 16 KiB, the same every run. */
static size_t small_size(long i)
{
	return 512 + (size_t)((i * 2654435761u) % (16 * 1024 - 512));
}

static uint64_t mkfiles(const char *dir, long n)
{
	char path[4096];
	memset(buf, 'x', 16 * 1024);
	for (long i = 0; i < n; i++) {
		if (i % 100 == 0) {
			snprintf(path, sizeof path, "%s/d%03ld", dir, i / 100);
			if (mkdir(path, 0755) < 0 && errno != EEXIST)
				die(path);
		}
		small_path(path, sizeof path, dir, i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die(path);
		if (write(fd, buf, small_size(i)) < 0)
			die("write");
		close(fd);
	}
	return (uint64_t)n;
}

static uint64_t smallfiles(const char *dir, long n)
{
	char path[4096];
	uint64_t total = 0;
	for (long i = 0; i < n; i++) {
		struct stat st;
		small_path(path, sizeof path, dir, i);
		if (stat(path, &st) < 0)
			die(path);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die(path);
		if (fstat(fd, &st) < 0)
			die("fstat");
		ssize_t r;
		while ((r = read(fd, buf, 64 * 1024)) > 0)
			total += (uint64_t)r;
		close(fd);
	}
	return total;
}

static uint64_t forkexec(long n, const char *prog)
{
	uint64_t ok = 0;
	char *argv[] = {(char *)prog, NULL};
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			execv(prog, argv);
			_exit(127);
		}
		int st;
		if (waitpid(pid, &st, 0) < 0)
			die("waitpid");
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
	}
	return ok;
}

/* Writes to n bytes of fresh anonymous memory (setup, not timed). */
static uint64_t touch(long n)
{
	char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		die("mmap");
	for (long i = 0; i < n; i += 4096)
		m[i] = 1;
	munmap(m, n);
	return (uint64_t)n;
}

static int ping[2], pong[2];
static long rounds;

static void *ponger(void *arg)
{
	(void)arg;
	char c;
	for (long i = 0; i < rounds; i++) {
		if (read(ping[0], &c, 1) != 1)
			die("read ping");
		if (write(pong[1], &c, 1) != 1)
			die("write pong");
	}
	return NULL;
}

/* Both threads share one CPU, the last one allowed, the same every run:
 * across two vCPUs every hand-over is a cross-CPU wake-up and the rate
 * drops from some 400k to some 70k switches a second; on one CPU each
 * hand-over is a direct switch, the worst case for a sched_switch probe. */
static uint64_t pingpong(long n)
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
	rounds = n;
	if (pipe(ping) < 0 || pipe(pong) < 0)
		die("pipe");
	pthread_t t;
	if (pthread_create(&t, NULL, ponger, NULL))
		die("pthread_create");
	char c = 'x';
	uint64_t got = 0;
	for (long i = 0; i < n; i++) {
		if (write(ping[1], &c, 1) != 1)
			die("write ping");
		if (read(pong[0], &c, 1) != 1)
			die("read pong");
		got++;
	}
	pthread_join(t, NULL);
	return got;
}

#include "net.c"

static volatile uint64_t sink;

static void spin(uint64_t iters)
{
	uint64_t x = 1;
	for (uint64_t i = 0; i < iters; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

/* The phases' lengths, printed as "phases_ns": sleep, read, spin. */
static int64_t phases[3];
static int nphases;

static uint64_t groundtruth(const char *path, long ms, uint64_t iters)
{
	int64_t t0 = now_ns();
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	int64_t t1 = now_ns();
	uint64_t n = seqread(path);
	int64_t t2 = now_ns();
	spin(iters);
	int64_t t3 = now_ns();
	phases[0] = t1 - t0;
	phases[1] = t2 - t1;
	phases[2] = t3 - t2;
	nphases = 3;
	return n;
}

static int64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Iterations per second of CPU time (so that other processes on the CPU do
 * not skew it), the fastest of five 0.1 s rounds. */
static uint64_t calibrate(void)
{
	uint64_t best = 0;
	for (int r = 0; r < 5; r++) {
		uint64_t iters = 1 << 20, done = 0;
		int64_t t0 = cpu_ns();
		while (cpu_ns() - t0 < 100000000) {
			spin(iters);
			done += iters;
		}
		uint64_t rate = done * 1000000000ull / (uint64_t)(cpu_ns() - t0);
		if (rate > best)
			best = rate;
	}
	return best;
}

int main(int argc, char **argv)
{
	int64_t entry = now_ns();
	if (argc < 3) {
		fprintf(stderr, "usage: work START_AT_NS MODE ARGS...\n");
		return 2;
	}
	int64_t start_at = atoll(argv[1]);
	const char *mode = argv[2];
	char **a = argv + 3;
	int na = argc - 3;

	int late = 0;
	if (start_at > 0) {
		struct timespec ts = {start_at / 1000000000, start_at % 1000000000};
		if (entry > start_at)
			late = 1;
		else
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
				;
	}
	int64_t t0 = now_ns();
	uint64_t sw0 = switches();
	int64_t cpu0 = process_cpu_ns();
	uint64_t check;

	if (!strcmp(mode, "seqread") && na == 1)
		check = seqread(a[0]);
	else if (!strcmp(mode, "mmapread") && na == 2)
		check = mmapread(a[0], atol(a[1]));
	else if (!strcmp(mode, "smallfiles") && na == 2)
		check = smallfiles(a[0], atol(a[1]));
	else if (!strcmp(mode, "forkexec") && na == 2)
		check = forkexec(atol(a[0]), a[1]);
	else if (!strcmp(mode, "pingpong") && na == 1)
		check = pingpong(atol(a[0]));
	else if (!strcmp(mode, "groundtruth") && na == 3)
		check = groundtruth(a[0], atol(a[1]), strtoull(a[2], NULL, 10));
	else if (!strcmp(mode, "tcpstream") && na == 1)
		check = tcpstream(strtoull(a[0], NULL, 10));
	else if (!strcmp(mode, "tcppong") && na == 2)
		check = tcppong(atol(a[0]), (size_t)atol(a[1]));
	else if (!strcmp(mode, "calibrate") && na == 0)
		check = calibrate();
	else if (!strcmp(mode, "touch") && na == 1)
		check = touch(atol(a[0]));
	else if (!strcmp(mode, "mkfiles") && na == 2)
		check = mkfiles(a[0], atol(a[1]));
	else {
		fprintf(stderr, "work: bad mode or arguments: %s\n", mode);
		return 2;
	}

	int64_t end = now_ns();
	printf("{\"entry_ns\":%lld,\"start_ns\":%lld,\"elapsed_ns\":%lld,\"late\":%s,\"check\":%llu,\"switches\":%llu,\"cpu_ns\":%lld,\"phases_ns\":[",
	       (long long)entry, (long long)t0, (long long)(end - t0), late ? "true" : "false",
	       (unsigned long long)check, (unsigned long long)(switches() - sw0), (long long)(process_cpu_ns() - cpu0));
	for (int i = 0; i < nphases; i++)
		printf("%s%lld", i ? "," : "", (long long)phases[i]);
	printf("]}\n");
	return 0;
}
