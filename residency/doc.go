// Package residency answers how much of a file is in the page cache now,
// and changes it on purpose: drop exactly some files (Evict), or bring in
// exactly the ranges a run will need (Prefetch). It also says whether a
// cache directory survives a reboot or a container's replacement.
//
// Truthfulness comes first. cachestat(2) needs ownership of the file,
// write permission, or CAP_FOWNER of the calling thread; without them it
// fails with EPERM, and mincore(2) on a mapping of the same file reports
// every page resident whether it is or not (the kernel hides the answer
// rather than leak it). So a file whose residency the kernel will not
// tell is "unknown" here, never a guess.
//
// Every file operation runs through an Actor, so it is done with the
// rights of the user coldtrace acts for (internal/actor states who that
// is), not with root's: the opens, the directory walks,
// cachestat itself (whose permission check uses the calling thread's
// credentials) and the reads of /proc/PID/maps.
package residency
