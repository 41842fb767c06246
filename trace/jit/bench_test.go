package jit

import (
	"fmt"
	"testing"
)

// BenchmarkFile is the user-space cost of one open event with every
// registry root resolved.
func BenchmarkFile(b *testing.B) {
	c, _ := NewCollector(Config{Proc: fakeProc{cwd: map[int32]string{1: "/"}}})
	c.Exec(1, 0, "/usr/bin/python3", []byte("HOME=/root\x00USER=root\x00"))
	paths := make([]string, 1000)
	for i := range paths {
		paths[i] = fmt.Sprintf("/usr/lib/python3.11/site-packages/pkg/sub/__pycache__/m%05d.cpython-311.pyc", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.File(RawFile{TS: uint64(i), PID: 1, TID: 1, Op: OpOpen, Dfd: AtFDCWD, Path: paths[i%len(paths)], Ret: 3})
		if len(c.events) > 1<<20 {
			c.events = c.events[:0]
		}
	}
}

// BenchmarkFileOutside is an open outside every cache.
func BenchmarkFileOutside(b *testing.B) {
	c, _ := NewCollector(Config{Proc: fakeProc{cwd: map[int32]string{1: "/"}}})
	c.Exec(1, 0, "/usr/bin/python3", []byte("HOME=/root\x00USER=root\x00"))
	for i := 0; i < b.N; i++ {
		c.File(RawFile{TS: uint64(i), PID: 1, TID: 1, Op: OpOpen, Dfd: AtFDCWD, Path: "/usr/lib/python3.11/site-packages/pkg/sub/data.bin", Ret: 3})
	}
}
