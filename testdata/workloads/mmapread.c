/* mmapread FILE: maps FILE and touches one byte of every page, the way a
 * model loader reading weights through mmap does. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: mmapread FILE\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		perror("fstat");
		return 1;
	}
	unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	long page = sysconf(_SC_PAGESIZE);
	unsigned long sum = 0;
	for (off_t off = 0; off < st.st_size; off += page)
		sum += p[off];
	printf("%lu\n", sum);
	return 0;
}
