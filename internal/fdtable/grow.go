package fdtable

/*
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

// shim_arg is ShimArg: the shim that becomes the user's command keeps
// the table it was given.
static const char shim_arg[] = "__coldtrace_shim";

// fd_table_slots is the table's size after the constructor: the start's
// descriptors fit in it. A soft RLIMIT_NOFILE below it leaves the table
// as it was (the dup fails).
enum { fd_table_slots = 1024 };

// glibc passes the program's arguments to its constructors.
__attribute__((constructor)) static void grow_fd_table(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc > 1 && argv && argv[1] && strcmp(argv[1], shim_arg) == 0)
		return;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = open("/", O_PATH | O_CLOEXEC);
	if (fd < 0)
		return;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, fd_table_slots - 1);
	if (high >= 0)
		close(high);
	close(fd);
}

static const char *shim_arg_name(void) { return shim_arg; }
*/
import "C"

// ShimArg is argv[1] of the process the constructor leaves alone:
// trace/launch.ShimArg (a test there holds them equal).
const ShimArg = "__coldtrace_shim"

// shimArg is the constructor's own copy of ShimArg.
func shimArg() string { return C.GoString(C.shim_arg_name()) }

// Slots is the size the constructor grows the table to.
const Slots = int(C.fd_table_slots)
