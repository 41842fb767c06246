/* readfiles FILE...: reads each file to its end, 64 KiB at a time.
 * Built static by the tests, so that the only files it reads are the
 * ones it is given (no loader, no libc, no locale files). */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static char buf[64 * 1024];

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			perror(argv[i]);
			return 1;
		}
		ssize_t n;
		while ((n = read(fd, buf, sizeof buf)) > 0)
			;
		if (n < 0) {
			perror(argv[i]);
			return 1;
		}
		close(fd);
	}
	return 0;
}
