package pystack

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/procmaps"
)

// TestNativeFramesNamedOnceTheRunEnds: a native leaf's module is opened
// when its frame arrives but its symbol tables are read only at the end
// (nameLazyFrames): until then the frame is module+0xVADDR; then it is
// the function's name, and two addresses inside one function are one
// stack. The frames are two addresses inside clock_nanosleep in a live
// sleep(1)'s C library.
func TestNativeFramesNamedOnceTheRunEnds(t *testing.T) {
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Skipf("start sleep: %v", err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	pid := sleep.Process.Pid
	var libc procmaps.Mapping
	var maps []procmaps.Mapping
	var err error
	for range 100 { // until the loader has mapped it
		if maps, err = procmaps.Read(pid); err != nil {
			t.Skipf("read sleep's maps: %v", err)
		}
		for _, m := range maps {
			if strings.HasPrefix(filepath.Base(m.Path), "libc.so") && m.Offset == 0 && libc.Path == "" {
				libc = m
			}
		}
		if libc.Path != "" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if libc.Path == "" {
		t.Skip("sleep maps no C library")
	}
	if fh, err := procmaps.Open(pid, libc); err != nil {
		t.Skipf("the C library through sleep's mapping: %v", err)
	} else {
		fh.Close()
	}
	lf, err := elf.Open(libc.Path)
	if err != nil {
		t.Skipf("open %s: %v", libc.Path, err)
	}
	defer lf.Close()
	syms, _ := lf.DynamicSymbols()
	var fn elf.Symbol
	for _, sy := range syms {
		if sy.Name == "clock_nanosleep" && sy.Size > 2 {
			fn = sy
		}
	}
	if fn.Name == "" {
		t.Skip("no sized clock_nanosleep in the C library")
	}
	// The mapping of the text that holds it: ip = start + file offset -
	// the mapping's offset.
	var ips []uint64
	for _, p := range lf.Progs {
		if p.Type != elf.PT_LOAD || fn.Value < p.Vaddr || fn.Value >= p.Vaddr+p.Filesz {
			continue
		}
		off := fn.Value - p.Vaddr + p.Off
		for _, m := range maps {
			if m.Inode == libc.Inode && off >= m.Offset && off < m.Offset+(m.End-m.Start) {
				ips = []uint64{m.Start + off - m.Offset + 1, m.Start + off - m.Offset + 2}
			}
		}
	}
	if ips == nil {
		t.Fatal("clock_nanosleep's text is not mapped")
	}
	s := &Sensor{byKey: map[string]int{}, byHash: map[uint64]int{}, hashPID: map[uint64]uint32{},
		modules: map[moduleID][]funcSym{}, pending: map[moduleID]pendingModule{}}
	s.decodeNative(uint32(pid), 1, ips[0])
	s.decodeNative(uint32(pid), 2, ips[1])
	first := s.stacks[s.byHash[1]].Frames[0]
	if !strings.HasPrefix(first.Func, filepath.Base(libc.Path)+"+0x") || len(s.pending) != 1 || len(s.modules) != 0 {
		t.Fatalf("before the end: frame %+v, %d modules pending, %d read; want module+0xVADDR, one pending, none read", first, len(s.pending), len(s.modules))
	}
	s.mu.Lock()
	s.nameLazyFrames()
	s.mu.Unlock()
	a, b := s.stacks[s.byHash[1]].Frames[0], s.stacks[s.byHash[2]].Frames[0]
	if a.Func != "clock_nanosleep" || s.byHash[1] != s.byHash[2] || len(s.pending) != 0 {
		t.Errorf("at the end: frames %q and %q (stacks %d, %d), %d pending; want clock_nanosleep, one stack, none pending",
			a.Func, b.Func, s.byHash[1], s.byHash[2], len(s.pending))
	}
}
