/* refault_locked: maps a cached file and faults its pages in again and
 * again (MADV_DONTNEED drops the mapping's page-table entries, not the
 * cache) for the given number of milliseconds. Run beside a process
 * that overwrites the same pages, a fault often finds its page's folio
 * locked by that writer and waits for it in I/O wait, though every page
 * is in the page cache and nothing is read from disk.
 * Prints the number of faults taken. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s FILE MILLISECONDS\n", argv[0]);
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(argv[1]);
		return 1;
	}
	volatile unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	long pg = sysconf(_SC_PAGESIZE);
	long long until = now_ms() + atoll(argv[2]);
	unsigned long faults = 0, sum = 0;
	while (now_ms() < until) {
		for (off_t off = 0; off < st.st_size; off += pg, faults++)
			sum += p[off];
		madvise((void *)p, st.st_size, MADV_DONTNEED);
	}
	printf("%lu %lu\n", faults, sum & 1);
	return 0;
}
