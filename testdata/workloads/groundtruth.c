/* groundtruth FILE SLEEP_MS SPIN_MS [parallel|sequential] [CSOURCE]
 *
 * The attribution ground truth: phases whose lengths the program measures
 * itself and prints as JSON on stdout, so a test can compare coldtrace's
 * breakdown with them. Sequential mode: sleep, a cold read of FILE (the
 * caller evicts it first), a CPU spin, and, given CSOURCE, a compile of it
 * by a `cc` subprocess (a JIT cache miss in miniature). Parallel mode: one
 * thread reads FILE while another spins (their overlap is printed too),
 * then a sleep. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *path;
static int64_t spin_ns, read_ns, spun_ns;
/* Each phase's start and end, for the overlap of the parallel mode. */
static int64_t read_t0, read_t1, spin_t0, spin_t1;
static volatile uint64_t sink;

static void *read_file(void *arg)
{
	(void)arg;
	int64_t t0 = read_t0 = now_ns();
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	static char buf[1 << 20];
	ssize_t n;
	uint64_t total = 0;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		total += (uint64_t)n;
	close(fd);
	sink += total;
	read_t1 = now_ns();
	read_ns = read_t1 - t0;
	return NULL;
}

static void *spin(void *arg)
{
	(void)arg;
	int64_t t0 = spin_t0 = now_ns();
	uint64_t x = 1;
	while (now_ns() - t0 < spin_ns) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	}
	sink += x;
	spin_t1 = now_ns();
	spun_ns = spin_t1 - t0;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: groundtruth FILE SLEEP_MS SPIN_MS [parallel]\n");
		return 2;
	}
	path = argv[1];
	int64_t sleep_ms = atoll(argv[2]);
	spin_ns = atoll(argv[3]) * 1000000;
	int parallel = argc > 4 && strcmp(argv[4], "parallel") == 0;
	const char *csource = argc > 5 ? argv[5] : NULL;
	int64_t compile_ns = 0;
	int64_t overlap_ns = 0; /* of the read and the spin, in parallel mode */
	int64_t start = now_ns();
	int64_t t0 = now_ns();
	int64_t slept;
	if (!parallel) {
		usleep(sleep_ms * 1000);
		slept = now_ns() - t0;
		read_file(NULL);
		spin(NULL);
		if (csource) {
			int64_t c0 = now_ns();
			pid_t pid = fork();
			if (pid == 0) {
				execlp("cc", "cc", "-O2", "-c", csource, "-o", "/dev/null", (char *)NULL);
				_exit(127);
			}
			int status;
			waitpid(pid, &status, 0);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "cc failed\n");
				return 1;
			}
			compile_ns = now_ns() - c0;
		}
	} else {
		pthread_t r, s;
		pthread_create(&r, NULL, read_file, NULL);
		pthread_create(&s, NULL, spin, NULL);
		pthread_join(r, NULL);
		pthread_join(s, NULL);
		int64_t lo = read_t0 > spin_t0 ? read_t0 : spin_t0;
		int64_t hi = read_t1 < spin_t1 ? read_t1 : spin_t1;
		overlap_ns = hi > lo ? hi - lo : 0;
		t0 = now_ns();
		usleep(sleep_ms * 1000);
		slept = now_ns() - t0;
	}
	printf("{\"sleep_ns\": %lld, \"read_ns\": %lld, \"spin_ns\": %lld, \"compile_ns\": %lld, \"overlap_ns\": %lld, \"total_ns\": %lld}\n",
	       (long long)slept, (long long)read_ns, (long long)spun_ns, (long long)compile_ns, (long long)overlap_ns,
	       (long long)(now_ns() - start));
	return 0;
}
