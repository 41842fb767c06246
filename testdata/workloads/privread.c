/* A privileged reader for the secure-exec tests: installed setuid root,
 * it reads PRIV_FILE (a root-only file, its path compiled in so that no
 * command line names it), then forks a child that reads PRIV_CHILD_FILE,
 * and prints "parent PID child PID bytes N N". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static long slurp(const char *path)
{
	char buf[65536];
	long total = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		exit(2);
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			perror(path);
			exit(2);
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	return total;
}

int main(void)
{
	long n = slurp(PRIV_FILE);
	int fds[2];
	if (pipe(fds)) {
		perror("pipe");
		return 2;
	}
	pid_t c = fork();
	if (c < 0) {
		perror("fork");
		return 2;
	}
	if (c == 0) {
		long m = slurp(PRIV_CHILD_FILE);
		if (write(fds[1], &m, sizeof(m)) != sizeof(m))
			_exit(2);
		_exit(0);
	}
	long m = 0;
	int st = 0;
	if (read(fds[0], &m, sizeof(m)) != sizeof(m) || waitpid(c, &st, 0) != c || st != 0) {
		fprintf(stderr, "child failed\n");
		return 2;
	}
	printf("parent %d child %d bytes %ld %ld\n", (int)getpid(), (int)c, n, m);
	return 0;
}
