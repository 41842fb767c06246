package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/residency"
	"github.com/coldtrace/coldtrace/trace"
)

// testFilePages is the size of the file read: well above the page-cache
// sensor's small-file threshold (256 KiB), small enough to take no time.
const testFilePages = 2048

// checkPageCache creates a file on dir's filesystem, evicts it, and
// traces a whole-file read of it, cold then warm: the counted misses must
// be its page count and then 0, the accessed pages its page count both
// times.
func checkPageCache(ctx context.Context, a actor.Actor, dir string) (out []Check) {
	const name = "page-cache counts"
	lacks := "trustworthy page-cache misses, hit ratios and the verdict"
	abs, err := filepath.Abs(dir)
	if err != nil {
		return []Check{{Status: Fail, Name: name, Detail: err.Error(), Lacks: lacks}}
	}
	// --dir is looked up with the user's rights: under sudo a directory
	// the user cannot reach fails alike whether or not it exists.
	var sfs unix.Statfs_t
	if err := a.Do(func() error { return unix.Statfs(abs, &sfs) }); err != nil {
		return []Check{{Status: Fail, Name: name, Detail: fmt.Sprintf("statfs %s: %v", abs, err), Lacks: lacks}}
	}
	inMemory := sfs.Type == unix.TMPFS_MAGIC || sfs.Type == unix.RAMFS_MAGIC
	if inMemory {
		out = append(out, Check{Status: Note, Name: "filesystem of " + abs,
			Detail: "tmpfs/ramfs: its files live only in memory, so nothing is read from disk and there are no misses to count; use --dir on a disk filesystem to check the counters"})
	}
	pageSize := os.Getpagesize()
	// The file is the user's, made where they may make one.
	var path string
	err = a.Do(func() error {
		var err error
		path, err = writeTestFile(abs, testFilePages*pageSize)
		return err
	})
	if err != nil {
		return append(out, Check{Status: Fail, Name: name, Detail: err.Error(), Lacks: lacks})
	}
	defer func() {
		if err := a.Do(func() error { return os.Remove(path) }); err != nil {
			out = append(out, Check{Status: Note, Name: "remove the test file", Detail: err.Error()})
		}
	}()

	// cachestat tells coldtrace status and evict what is cached; it also
	// proves the eviction here.
	evicted, probs := residency.Evict(a, []string{path})
	cold := !inMemory
	switch {
	case len(probs) > 0:
		out = append(out, Check{Status: Fail, Name: "evict", Detail: probs[0].Err.Error(), Lacks: "coldtrace evict; the miss check"})
		cold = false
	case !evicted[0].Known:
		out = append(out, Check{Status: Note, Name: "cachestat", Detail: evicted[0].Unknown, Lacks: "residency in coldtrace status, evict and prefetch"})
	case evicted[0].After.Cached > 0 && !inMemory:
		out = append(out, Check{Status: Fail, Name: "evict", Detail: fmt.Sprintf("%d of %d pages stayed cached after POSIX_FADV_DONTNEED", evicted[0].After.Cached, testFilePages),
			Lacks: "coldtrace evict; the miss check"})
		cold = false
	case inMemory:
		out = append(out, Check{Status: OK, Name: "cachestat", Detail: fmt.Sprintf("%d pages of the test file cached (tmpfs pages cannot be evicted)",
			evicted[0].After.Cached)})
	default:
		out = append(out, Check{Status: OK, Name: "cachestat", Detail: fmt.Sprintf("evicted the test file: %d pages cached before, %d after",
			evicted[0].Before.Cached, evicted[0].After.Cached)})
	}

	first, err := tracedRead(ctx, a, path)
	if errors.Is(err, errNotSeen) && inMemory {
		// shmem reads its pages without the filemap tracepoints.
		return append(out, Check{Status: Note, Name: name + " on " + abs,
			Detail: "reads of tmpfs files are not seen (tmpfs has its own read path, without the filemap tracepoints); they never come from disk",
			Lacks:  "files on tmpfs in the file list"})
	}
	if err != nil {
		return append(out, Check{Status: Fail, Name: name, Detail: err.Error(), Lacks: lacks})
	}
	// The warm read must miss exactly the pages that are not cached just
	// before it: none, unless memory pressure or DAMON took some back in
	// between, which cachestat tells. Between that look and the read lies
	// the traced run's start (half a second on a slow VM), in which a VM
	// whose host takes its free memory back can lose a few pages more: a
	// warm read that misses more than cachestat said is done once again.
	var second record.File
	var wantWarm uint64
	var retried string
	for try := 1; try <= 2; try++ {
		wantWarm = 0
		if st, probs := residency.Stat(a, []string{path}); len(probs) == 0 && len(st) == 1 && st[0].Known && st[0].Cached < testFilePages {
			wantWarm = testFilePages - st[0].Cached
		}
		second, err = tracedRead(ctx, a, path)
		if err != nil {
			return append(out, Check{Status: Fail, Name: name, Detail: err.Error(), Lacks: lacks})
		}
		if second.PagesMissed <= wantWarm || try == 2 {
			break
		}
		retried = fmt.Sprintf(" (read again: the first warm read missed %d pages where %d were not cached just before it: evicted while the trace started)",
			second.PagesMissed, wantWarm)
	}
	check := func(what string, f record.File, wantMissed uint64) Check {
		c := Check{Status: OK, Name: fmt.Sprintf("page cache, %s read of a %d-page file in %s", what, testFilePages, abs),
			Detail: fmt.Sprintf("%d pages missed, %d accessed", f.PagesMissed, f.PagesAccessed)}
		// A page evicted during the read (memory pressure, DAMON) and
		// read from disk again is missed twice, and counted as read
		// again: the counters are right, the machine was short of memory.
		missed := f.PagesMissed
		if f.PagesReread > 0 && f.PagesReread <= missed {
			missed -= f.PagesReread
			c.Detail += fmt.Sprintf(" (%d of them read again after their eviction during the read)", f.PagesReread)
		}
		if missed != wantMissed || f.PagesAccessed != testFilePages {
			c.Status, c.Lacks = Fail, lacks
			c.Detail += fmt.Sprintf("; want %d missed, %d accessed: this kernel's page-cache tracepoints do not count as coldtrace expects", wantMissed, testFilePages)
		}
		return c
	}
	if cold {
		out = append(out, check("cold", first, testFilePages))
	} else {
		out = append(out, check("first", first, 0))
	}
	warm := check("warm", second, wantWarm)
	warm.Detail += retried
	return append(out, warm)
}

// writeTestFile writes size bytes to a new file in dir, readable by the
// user the traced reader runs as, synced so that it can be evicted.
func writeTestFile(dir string, size int) (string, error) {
	f, err := os.CreateTemp(dir, ".coldtrace-doctor-*")
	if err != nil {
		return "", fmt.Errorf("create a test file in %s (--dir names a directory you may write): %w", dir, err)
	}
	path := f.Name()
	err = errors.Join(f.Chmod(0o644), writeAll(f, bytes.Repeat([]byte("coldtrace"), size/9+1)[:size]), f.Sync(), f.Close())
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write the test file %s: %w", path, err)
	}
	return path, nil
}

func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}

// tracedRead traces cat reading path whole and returns the record's entry
// for the file.
func tracedRead(ctx context.Context, a actor.Actor, path string) (record.File, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return record.File{}, err
	}
	defer null.Close()
	rec, err := trace.Run(ctx, trace.Options{Command: []string{"cat", path}, Actor: a, NoGPU: true,
		Stdin: null, Stdout: null, Stderr: null})
	if err != nil {
		return record.File{}, fmt.Errorf("trace cat %s: %w", path, err)
	}
	if rec.ExitCode != 0 {
		return record.File{}, fmt.Errorf("cat %s exited %d %s", path, rec.ExitCode, rec.StartError)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return record.File{}, err
	}
	for _, f := range rec.Files {
		if f.Ino == st.Ino && (f.Path == path || f.Dev == kernelDev(st.Dev)) {
			return f, nil
		}
	}
	return record.File{}, fmt.Errorf("%w: the traced read of %s is not in the record (%d files seen)", errNotSeen, path, len(rec.Files))
}

// errNotSeen is a traced read that left no trace of the file.
var errNotSeen = errors.New("file not seen")

// kernelDev turns a user-space dev_t into the kernel's encoding that the
// tracepoints carry (major<<20 | minor).
func kernelDev(dev uint64) uint32 {
	return unix.Major(dev)<<20 | unix.Minor(dev)
}
