/* overwrite_pages: overwrites every page of an existing file in place,
 * over and over, until killed: each write locks the page's folio while
 * it copies, and inserts no page into the cache. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE\n", argv[0]);
		return 2;
	}
	int fd = open(argv[1], O_WRONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[1]);
		return 1;
	}
	char buf[4096];
	memset(buf, 'w', sizeof buf);
	for (;;)
		for (off_t off = 0; off + (off_t)sizeof buf <= st.st_size; off += sizeof buf)
			if (pwrite(fd, buf, sizeof buf, off) != (ssize_t)sizeof buf) {
				perror("pwrite");
				return 1;
			}
}
