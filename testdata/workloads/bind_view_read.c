/* bind_view_read [-n] [-o SCRATCH] SRC VIEW NAME MODE [PROGRAM ARG...]
 *
 * In a private mount namespace of its own, bind-mounts directory SRC on
 * VIEW (with -o: mounts an overlay of SRC as its lower layer on VIEW, its
 * upper and work directories made in SCRATCH, as a container's image),
 * reads VIEW/NAME, then unmounts VIEW and exits at once: a reader
 * whose view of the file is gone (namespace and mount) microseconds
 * after its reads, before a tracer's user space can look at its mounts.
 * With -n it mounts in the namespace it was started in instead.
 *
 * MODE is how the file is read:
 *   read   read(2) in 64 KiB chunks
 *   mmap   mapped, the descriptor closed, then one byte of every page
 *   sendfile  sendfile(2) to /dev/null
 *   run    PROGRAM ARG... is run in a child, each ARG "{}" replaced by
 *          VIEW/NAME (an io_uring reader, say), and waited for
 * Prints the bytes read (run: nothing of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "bind_view_read: %s: %s\n", what, strerror(errno));
	exit(1);
}

static long long read_all(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	static char buf[64 << 10];
	long long total = 0;
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		total += n;
	if (n < 0)
		die("read");
	close(fd);
	return total;
}

static long long map_all(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		die("fstat");
	volatile unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	close(fd); /* the mapping alone holds the file from here */
	unsigned long sum = 0;
	for (off_t off = 0; off < st.st_size; off += 4096)
		sum += p[off];
	munmap((void *)p, st.st_size);
	return sum == (unsigned long)-1 ? 0 : st.st_size;
}

static long long send_all(const char *path)
{
	int fd = open(path, O_RDONLY);
	int out = open("/dev/null", O_WRONLY);
	if (fd < 0 || out < 0)
		die(path);
	long long total = 0;
	ssize_t n;
	while ((n = sendfile(out, fd, NULL, 1 << 20)) > 0)
		total += n;
	if (n < 0)
		die("sendfile");
	close(out);
	close(fd);
	return total;
}

static void run(const char *path, char **argv)
{
	for (char **a = argv; *a; a++)
		if (strcmp(*a, "{}") == 0)
			*a = (char *)path;
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		execvp(argv[0], argv);
		die(argv[0]);
	}
	int status;
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "bind_view_read: %s failed\n", argv[0]);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *scratch = NULL;
	int own_ns = 1;
	if (argc > 1 && strcmp(argv[1], "-n") == 0) {
		own_ns = 0;
		argv++;
		argc--;
	}
	if (argc > 2 && strcmp(argv[1], "-o") == 0) {
		scratch = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc < 5 || (strcmp(argv[4], "run") == 0 && argc < 6)) {
		fprintf(stderr, "usage: bind_view_read [-n] [-o SCRATCH] SRC VIEW NAME read|mmap|sendfile|run [PROGRAM ARG...]\n");
		return 2;
	}
	const char *src = argv[1], *view = argv[2], *name = argv[3], *mode = argv[4];
	if (own_ns && unshare(CLONE_NEWNS) < 0)
		die("unshare(CLONE_NEWNS)");
	if (own_ns && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("mount --make-rprivate /");
	if (scratch) {
		char upper[2048], work[2048], opts[8192];
		snprintf(upper, sizeof upper, "%s/upper", scratch);
		snprintf(work, sizeof work, "%s/work", scratch);
		if ((mkdir(upper, 0755) < 0 && errno != EEXIST) || (mkdir(work, 0755) < 0 && errno != EEXIST))
			die("mkdir");
		if (snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", src, upper, work) >= (int)sizeof opts) {
			fprintf(stderr, "bind_view_read: overlay options too long\n");
			return 2;
		}
		if (mount("overlay", view, "overlay", 0, opts) < 0)
			die("mount -t overlay");
	} else if (mount(src, view, NULL, MS_BIND, NULL) < 0) {
		die("mount --bind");
	}
	char path[4096];
	if (snprintf(path, sizeof path, "%s/%s", view, name) >= (int)sizeof path) {
		fprintf(stderr, "bind_view_read: path too long\n");
		return 2;
	}
	if (strcmp(mode, "read") == 0)
		printf("%lld\n", read_all(path));
	else if (strcmp(mode, "mmap") == 0)
		printf("%lld\n", map_all(path));
	else if (strcmp(mode, "sendfile") == 0)
		printf("%lld\n", send_all(path));
	else if (strcmp(mode, "run") == 0)
		run(path, argv + 5);
	else {
		fprintf(stderr, "bind_view_read: unknown mode %s\n", mode);
		return 2;
	}
	fflush(stdout);
	if (umount2(view, MNT_DETACH) < 0)
		die("umount");
	return 0;
}
