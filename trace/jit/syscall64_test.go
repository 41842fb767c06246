package jit

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSyscallHeader holds bpf/include/syscall64.h, the BPF side's x86-64
// numbers, to golang.org/x/sys/unix, the Go side's.
func TestSyscallHeader(t *testing.T) {
	want := map[string]int{
		"NR_read": unix.SYS_READ, "NR_io_uring_enter": unix.SYS_IO_URING_ENTER, "NR_write": unix.SYS_WRITE, "NR_pread64": unix.SYS_PREAD64, "NR_readv": unix.SYS_READV,
		"NR_preadv": unix.SYS_PREADV, "NR_preadv2": unix.SYS_PREADV2, "NR_sendfile": unix.SYS_SENDFILE, "NR_splice": unix.SYS_SPLICE, "NR_copy_file_range": unix.SYS_COPY_FILE_RANGE, "NR_open": unix.SYS_OPEN, "NR_stat": unix.SYS_STAT, "NR_lstat": unix.SYS_LSTAT,
		"NR_pwrite64": unix.SYS_PWRITE64, "NR_writev": unix.SYS_WRITEV, "NR_access": unix.SYS_ACCESS,
		"NR_fsync": unix.SYS_FSYNC, "NR_fdatasync": unix.SYS_FDATASYNC, "NR_truncate": unix.SYS_TRUNCATE,
		"NR_ftruncate": unix.SYS_FTRUNCATE, "NR_chdir": unix.SYS_CHDIR, "NR_fchdir": unix.SYS_FCHDIR,
		"NR_rename": unix.SYS_RENAME, "NR_mkdir": unix.SYS_MKDIR, "NR_creat": unix.SYS_CREAT, "NR_unlink": unix.SYS_UNLINK,
		"NR_sync": unix.SYS_SYNC, "NR_openat": unix.SYS_OPENAT, "NR_mkdirat": unix.SYS_MKDIRAT,
		"NR_newfstatat": unix.SYS_NEWFSTATAT, "NR_unlinkat": unix.SYS_UNLINKAT, "NR_renameat": unix.SYS_RENAMEAT,
		"NR_faccessat": unix.SYS_FACCESSAT, "NR_sync_file_range": unix.SYS_SYNC_FILE_RANGE,
		"NR_fallocate": unix.SYS_FALLOCATE, "NR_pwritev": unix.SYS_PWRITEV, "NR_syncfs": unix.SYS_SYNCFS,
		"NR_renameat2": unix.SYS_RENAMEAT2, "NR_pwritev2": unix.SYS_PWRITEV2, "NR_statx": unix.SYS_STATX,
		"NR_openat2": unix.SYS_OPENAT2, "NR_faccessat2": unix.SYS_FACCESSAT2,
		"O_WRONLY_": unix.O_WRONLY, "O_CREAT_": unix.O_CREAT, "O_TRUNC_": unix.O_TRUNC,
		"ENOSYS_": int(unix.ENOSYS), "AT_FDCWD_": unix.AT_FDCWD,
	}
	f, err := os.Open("../../bpf/include/syscall64.h")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[0] != "#define" {
			continue
		}
		v, err := strconv.ParseInt(fields[2], 0, 64)
		if err != nil {
			t.Errorf("%s: %v", sc.Text(), err)
			continue
		}
		w, ok := want[fields[1]]
		if !ok {
			t.Errorf("%s: no Go counterpart in this test", fields[1])
			continue
		}
		seen++
		if int(v) != w {
			t.Errorf("%s is %d in syscall64.h, %d in x/sys/unix", fields[1], v, w)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(want) {
		t.Errorf("%d of %d definitions found", seen, len(want))
	}
}
