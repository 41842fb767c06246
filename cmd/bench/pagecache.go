package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// evict drops path's clean pages from the page cache (a directory's:
// those of every file under it). Unlike drop_caches it touches nothing
// else: the rest of the cache, and the memory the host has lent, stay as
// they are.
func evict(path string) error {
	if files, ok := treeFiles(path); ok {
		for _, f := range files {
			if err := evictFile(f); err != nil {
				return err
			}
		}
		return nil
	}
	return evictFile(path)
}

// treeFiles lists the regular files under path when it is a directory.
func treeFiles(path string) ([]string, bool) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return nil, false
	}
	var files []string
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	return files, true
}

func evictFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("posix_fadvise(%s, DONTNEED): %w", path, err)
	}
	return nil
}

// resident is the share of path's pages in the page cache (mincore); a
// directory's is its files' together.
func resident(path string) (float64, error) {
	files, ok := treeFiles(path)
	if !ok {
		n, total, err := residentPages(path)
		if err != nil || total == 0 {
			return 1, err
		}
		return float64(n) / float64(total), nil
	}
	var n, total int
	for _, f := range files {
		fn, ft, err := residentPages(f)
		if err != nil {
			return 0, err
		}
		n, total = n+fn, total+ft
	}
	if total == 0 {
		return 1, nil
	}
	return float64(n) / float64(total), nil
}

// residentPages counts path's pages in the page cache, and its pages.
func residentPages(path string) (int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size := int(st.Size())
	if size == 0 {
		return 0, 0, nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, fmt.Errorf("mmap %s: %w", path, err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (size+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(size), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, 0, fmt.Errorf("mincore %s: %w", path, errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, len(vec), nil
}

// warm reads path so that all of it is cached.
func warm(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// prepare sets w's data file to the state its runs expect and returns the
// share of it resident at the end.
func prepare(w *workload) (float64, error) {
	if w.File == "" {
		return 0, nil
	}
	if w.Cold {
		if err := evict(w.File); err != nil {
			return 0, err
		}
		r, err := resident(w.File)
		if err != nil {
			return 0, err
		}
		if r > 0.01 {
			return r, fmt.Errorf("%s is still %.0f%% cached after posix_fadvise(DONTNEED): is it on tmpfs? pass -dir on a disk filesystem", w.File, 100*r)
		}
		return r, nil
	}
	r, err := resident(w.File)
	if err != nil || r >= 1 {
		return r, err
	}
	if err := warm(w.File); err != nil {
		return 0, err
	}
	return resident(w.File)
}
