/* Reads a file through io_uring, every read flagged IOSQE_ASYNC so that
 * an io-wq worker thread, not the submitter, does it: the shape of
 * runtimes that push file reads to io_uring's worker pool. Raw system
 * calls, so the test needs no liburing.
 *
 * usage: uring_async_read FILE [CHUNK_BYTES [direct|inline|async [STEP]]];
 * prints the bytes read. "direct" opens FILE with O_DIRECT; "inline"
 * leaves IOSQE_ASYNC off, so the submitter tries the read itself first
 * (the kernel punts it to a worker when the pages are not cached). STEP
 * reads one chunk of every STEP (default 1: all of them), the shape of a
 * reader that picks its chunks. "+fixed" after the mode reads a
 * registered file (IOSQE_FIXED_FILE), "+readv" with IORING_OP_READV
 * into two buffers, "+curpos" at the file's position (offset -1, with
 * STEP's skips made by lseek): "inline+fixed", "async+readv+curpos". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE [CHUNK_BYTES [direct|inline|async[+fixed][+readv][+curpos] [STEP]]]\n", argv[0]);
		return 2;
	}
	size_t chunk = argc > 2 ? strtoul(argv[2], NULL, 0) : 1 << 20;
	const char *mode = argc > 3 ? argv[3] : "async";
	int direct = strncmp(mode, "direct", 6) == 0;
	int inline_read = strncmp(mode, "inline", 6) == 0;
	int fixed = strstr(mode, "+fixed") != NULL;
	int vectored = strstr(mode, "+readv") != NULL;
	int curpos = strstr(mode, "+curpos") != NULL;
	unsigned long long step = argc > 4 ? strtoull(argv[4], NULL, 0) : 1;
	if (step < 1)
		step = 1;
	int fd = open(argv[1], O_RDONLY | (direct ? O_DIRECT : 0));
	if (fd < 0)
		die("open");
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	int ring = syscall(__NR_io_uring_setup, 4, &p);
	if (ring < 0)
		die("io_uring_setup");
	size_t sqsz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cqsz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (cqsz > sqsz)
			sqsz = cqsz;
		cqsz = sqsz;
	}
	char *sq = mmap(NULL, sqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		die("mmap sq");
	char *cq = sq;
	if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
		cq = mmap(NULL, cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED)
			die("mmap cq");
	}
	struct io_uring_sqe *sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
	if (sqes == MAP_FAILED)
		die("mmap sqes");
	unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail);
	unsigned sq_mask = *(unsigned *)(sq + p.sq_off.ring_mask);
	unsigned *sq_array = (unsigned *)(sq + p.sq_off.array);
	unsigned *cq_head = (unsigned *)(cq + p.cq_off.head);
	unsigned *cq_tail = (unsigned *)(cq + p.cq_off.tail);
	unsigned cq_mask = *(unsigned *)(cq + p.cq_off.ring_mask);
	struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);

	if (fixed && syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES, &fd, 1) < 0)
		die("io_uring_register");
	void *buf;
	if (posix_memalign(&buf, 4096, chunk))
		die("posix_memalign");
	/* two buffers, the first a page or half the chunk */
	size_t first = chunk / 2 < 4096 ? chunk / 2 : 4096;
	struct iovec iov[2] = {{buf, first}, {(char *)buf + first, chunk - first}};
	unsigned long long total = 0, off = 0;
	for (;;) {
		unsigned tail = *sq_tail, idx = tail & sq_mask;
		struct io_uring_sqe *sqe = &sqes[idx];
		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = vectored ? IORING_OP_READV : IORING_OP_READ;
		sqe->flags = (inline_read ? 0 : IOSQE_ASYNC) | (fixed ? IOSQE_FIXED_FILE : 0);
		sqe->fd = fixed ? 0 : fd;
		sqe->addr = vectored ? (unsigned long)iov : (unsigned long)buf;
		sqe->len = vectored ? 2 : chunk;
		sqe->off = curpos ? (__u64)-1 : off;
		sq_array[idx] = idx;
		__atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
		if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
			die("io_uring_enter");
		unsigned head = *cq_head;
		while (head == __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
			if (syscall(__NR_io_uring_enter, ring, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
				die("io_uring_enter");
		}
		int res = cqes[head & cq_mask].res;
		__atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
		if (res < 0) {
			fprintf(stderr, "read: %s\n", strerror(-res));
			return 1;
		}
		if (res == 0)
			break;
		total += res;
		off += (unsigned long long)res + (step - 1) * chunk;
		if (curpos && step > 1 && lseek(fd, off, SEEK_SET) < 0)
			die("lseek");
	}
	printf("%llu\n", total);
	return 0;
}
