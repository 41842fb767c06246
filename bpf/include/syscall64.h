/* x86-64 ABI numbers the BPF programs compare against: syscall numbers
 * (arch/x86/entry/syscalls/syscall_64.tbl), the open(2) flags and the one
 * errno the entry code leaves in regs->ax. The objects are built for amd64
 * only; the Go side uses golang.org/x/sys/unix's SYS_*, O_* and E*
 * constants for the same values, and trace/jit's tests hold the two
 * together. */
#pragma once

#define NR_read 0
#define NR_write 1
#define NR_open 2
#define NR_stat 4
#define NR_lstat 6
#define NR_pread64 17
#define NR_pwrite64 18
#define NR_readv 19
#define NR_writev 20
#define NR_access 21
#define NR_sendfile 40
#define NR_fsync 74
#define NR_fdatasync 75
#define NR_truncate 76
#define NR_ftruncate 77
#define NR_chdir 80
#define NR_fchdir 81
#define NR_rename 82
#define NR_mkdir 83
#define NR_creat 85
#define NR_unlink 87
#define NR_sync 162
#define NR_openat 257
#define NR_mkdirat 258
#define NR_newfstatat 262
#define NR_unlinkat 263
#define NR_renameat 264
#define NR_faccessat 269
#define NR_splice 275
#define NR_sync_file_range 277
#define NR_fallocate 285
#define NR_preadv 295
#define NR_pwritev 296
#define NR_syncfs 306
#define NR_renameat2 316
#define NR_copy_file_range 326
#define NR_preadv2 327
#define NR_pwritev2 328
#define NR_statx 332
#define NR_io_uring_enter 426
#define NR_openat2 437
#define NR_faccessat2 439

#define O_WRONLY_ 00000001
#define O_CREAT_ 00000100
#define O_TRUNC_ 00001000

#define ENOSYS_ 38
#define AT_FDCWD_ -100
