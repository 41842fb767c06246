package download

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/record"
)

// A file on tmpfs fills no page cache the page-cache events see (shmem
// inserts its pages without mm_filemap_add_to_page_cache: measured here,
// a 12 MiB download into /dev/shm left no entry in files[]). Its writes
// are measured instead by polling: while a process receives a download,
// each poll lists its open files, keeps an O_PATH descriptor of every
// regular file on tmpfs, and reads the space of all those kept (st_blocks:
// the pages written, which a parallel downloader's pwrite far ahead does
// not inflate as it does the size) until destSlack after their last
// growth. The growth per poll is the file's written bytes, matched with
// the received bytes as page-cache writes are.

// maxPolledFiles bounds the tmpfs files whose sizes are polled.
const maxPolledFiles = 256

// polledFile is one tmpfs file's size, poll by poll.
type polledFile struct {
	fd     int   // O_PATH: fstat works after a close or a rename
	size   int64 // bytes allocated (st_blocks × 512)
	length int64 // st_size when last read: the file's size for files[]
	points []point
	lastNS int64 // when it last grew (ns from the run's start)
}

// tmpfsSizes are the polled tmpfs files, by key.
type tmpfsSizes struct {
	files map[FileKey]*polledFile
	order []FileKey
	// now is the time since the run began (ns), read as each size is:
	// a look stamped with its poll's tick, which a loaded machine can
	// run long after, would date a whole body to before its first byte
	// was received and disown it.
	now func() int64
}

func newTmpfsSizes(now func() int64) *tmpfsSizes {
	return &tmpfsSizes{files: map[FileKey]*polledFile{}, now: now}
}

// watch keeps the regular files on tmpfs that process pid has open; it
// names them in names when they have no name yet.
func (t *tmpfsSizes) watch(pid int32, names map[FileKey]string) {
	dir := "/proc/" + strconv.Itoa(int(pid)) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if len(t.files) >= maxPolledFiles {
			return
		}
		p := filepath.Join(dir, e.Name())
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		k := FileKey{Dev: kernelDev(&st), Ino: st.Ino}
		if _, ok := t.files[k]; ok {
			continue
		}
		var fs unix.Statfs_t
		if unix.Statfs(p, &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
			continue
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var again unix.Stat_t
		if unix.Fstat(fd, &again) != nil || again.Ino != st.Ino {
			unix.Close(fd)
			continue
		}
		// What it held when first seen was written since the run began
		// when the run created it, else it is where its growth counts
		// from (a file the run appends to).
		nowNS := t.now()
		f := &polledFile{fd: fd, size: again.Blocks * 512, length: again.Size, lastNS: nowNS}
		if f.size > 0 && bornInRun(fd, nowNS) {
			f.points = append(f.points, point{End: nowNS, Bytes: uint64(f.size)})
		}
		t.files[k] = f
		t.order = append(t.order, k)
		if _, named := names[k]; !named {
			if target, err := os.Readlink(p); err == nil && filepath.IsAbs(target) {
				names[k] = strings.TrimSuffix(target, " (deleted)")
			}
		}
	}
}

// poll reads the kept files' sizes; a file that has not grown for
// destSlack is no longer read.
func (t *tmpfsSizes) poll() {
	for _, k := range t.order {
		f := t.files[k]
		if f.fd < 0 {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(f.fd, &st) != nil {
			t.release(f)
			continue
		}
		nowNS := t.now()
		f.length = st.Size
		if size := st.Blocks * 512; size > f.size {
			f.points = append(f.points, point{End: nowNS, Bytes: uint64(size - f.size)})
			f.lastNS = nowNS
			f.size = size
		}
		if nowNS-f.lastNS > destSlack {
			t.release(f)
		}
	}
}

func (t *tmpfsSizes) release(f *polledFile) {
	if f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
	}
}

// written is the polled files' growth as the matcher takes it.
func (t *tmpfsSizes) written() []written {
	var out []written
	for _, k := range t.order {
		if f := t.files[k]; len(f.points) > 0 {
			out = append(out, written{Key: k, Points: f.points})
		}
	}
	return out
}

// close releases every descriptor still kept.
func (t *tmpfsSizes) close() {
	for _, f := range t.files {
		t.release(f)
	}
}

// bornInRun says whether the file open at fd was born (statx btime)
// after the run began, nowNS ago.
func bornInRun(fd int, nowNS int64) bool {
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_BTIME == 0 {
		return true // no birth time: as before, the match's window decides
	}
	born := time.Unix(st.Btime.Sec, int64(st.Btime.Nsec))
	return !born.Before(time.Now().Add(-time.Duration(nowNS)))
}

// fileRows gives every file a download wrote that only the polls
// measured (on tmpfs, where the page-cache sensor sees no insertion) its
// row in rec.Files, so that files[] holds each file downloads[] names:
// the pages the run created in it (its growth, as a page-cache file's
// PagesCreated), its size at its last poll, its final and first names as
// the download's, and no read from disk, which tmpfs never does. A row's
// ID is its index, as the page-cache sensor's are.
func (t *tmpfsSizes) fileRows(rec *record.Record, pageSize uint64) {
	have := make(map[FileKey]bool, len(rec.Files))
	for _, f := range rec.Files {
		have[FileKey{Dev: f.Dev, Ino: f.Ino, Gen: f.Gen}] = true
	}
	for _, d := range rec.Downloads {
		for _, df := range d.Files {
			k := fileKeyOf(df)
			pf, polled := t.files[k]
			if !polled || have[k] || len(pf.points) == 0 || df.Path == "" {
				continue
			}
			have[k] = true
			created := sumPoints(pf.points)
			rec.Files = append(rec.Files, record.File{ID: len(rec.Files), Dev: df.Dev, Ino: df.Ino,
				Path: df.Path, FirstPath: df.WrittenPath, SizeBytes: pf.length,
				PagesCreated: (created + pageSize - 1) / pageSize, FS: "tmpfs"})
		}
	}
}
