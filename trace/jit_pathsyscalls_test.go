package trace

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/jit"
)

// syscallLinks counts this process's BPF links whose program is one of the
// JIT sensor's path-syscall programs (on_path_*), and those of the
// download sensor's write hooks (on_tmpfs_*): the kernel's own account of
// which syscall tracepoints the tracer holds, whatever the record says.
func syscallLinks(t *testing.T) (path, writes int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || target != "anon_inode:bpf_link" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue // closed meanwhile
		}
		name := linkProgName(string(info))
		switch {
		case strings.HasPrefix(name, "on_path_"):
			path++
		case strings.HasPrefix(name, "on_tmpfs_"):
			writes++
		}
	}
	return path, writes
}

// linkProgName is the name of the program of a BPF link, from its fdinfo.
func linkProgName(fdinfo string) string {
	for _, l := range strings.Split(fdinfo, "\n") {
		v, ok := strings.CutPrefix(l, "prog_id:")
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return ""
		}
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
		if err != nil {
			return ""
		}
		defer p.Close()
		pi, err := p.Info()
		if err != nil {
			return ""
		}
		return pi.Name
	}
	return ""
}

// steppedRun traces command in the background; the command waits at
// points the test releases by creating files (see waitFor in the scripts).
type steppedRun struct {
	dir  string
	done chan struct{}
	rec  *record.Record
	err  error
}

func startStepped(t *testing.T, dir string, command []string) *steppedRun {
	t.Helper()
	s := &steppedRun{dir: dir, done: make(chan struct{})}
	self, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Command: command, JITSyscalls: JITSyscallsAuto, NoGPU: true, Actor: self,
		Stdin: os.Stdin, Stdout: os.Stderr, Stderr: os.Stderr}
	go func() {
		defer close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s.rec, s.err = Run(ctx, opts)
	}()
	return s
}

// wait waits for the command to create name; false if it ended first or
// did not within a minute.
func (s *steppedRun) wait(name string) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(s.dir, name)); err == nil {
			return true
		}
		select {
		case <-s.done:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

func (s *steppedRun) release(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// finish releases every step (a failed test must not leave the command
// waiting) and returns the record.
func (s *steppedRun) finish(t *testing.T, names ...string) *record.Record {
	t.Helper()
	for _, n := range names {
		_ = os.WriteFile(filepath.Join(s.dir, n), nil, 0o644)
	}
	<-s.done
	if s.err != nil {
		t.Fatalf("Run: %v", s.err)
	}
	if s.rec.ExitCode != 0 {
		t.Fatalf("command exited %d", s.rec.ExitCode)
	}
	return s.rec
}

// shWait is a shell function that waits for a file the test creates.
const shWait = `waitfor() { while [ ! -e "$1" ]; do sleep 0.02; done; }; `

// serveDownload serves size bytes to each connection on loopback.
func serveDownload(t *testing.T, size int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		buf := make([]byte, 256<<10)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			for sent := 0; sent < size; sent += len(buf) {
				if _, err := c.Write(buf); err != nil {
					break
				}
			}
			_, _ = io.Copy(io.Discard, c) // until the client closes
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// downloadScript downloads into a file, keeps the connection open, says
// so, and waits for the test before closing it.
const downloadScript = `
import os, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
dir, size = sys.argv[2], int(sys.argv[3])
s = socket.create_connection((host, int(port)))
got = 0
with open(os.path.join(dir, "model.bin"), "wb") as f:
    while got < size:
        b = s.recv(256 << 10)
        if not b:
            break
        f.write(b)
        got += len(b)
open(os.path.join(dir, "downloaded"), "w").close()
while not os.path.exists(os.path.join(dir, "go")):
    time.sleep(0.02)
s.close()
print(got)
`

// TestPathSyscallsOffForDownloadAndPython: a download, and a plain Python
// program importing modules and reading files, attach no path-syscall
// probe: the record says they were never on, and the kernel holds no link
// of theirs while the command runs (read at a point the command waits at,
// after the download sensor has seen the download).
func TestPathSyscallsOffForDownloadAndPython(t *testing.T) {
	requireTracing(t)
	py := realPython(t)
	const size = 32 << 20
	t.Run("download", func(t *testing.T) {
		dir := t.TempDir()
		script := filepath.Join(dir, "dl.py")
		if err := os.WriteFile(script, []byte(downloadScript), 0o644); err != nil {
			t.Fatal(err)
		}
		addr := serveDownload(t, size)
		s := startStepped(t, dir, []string{py, script, addr, dir, strconv.Itoa(size)})
		if !s.wait("downloaded") {
			s.finish(t, "go")
			t.Fatal("the download did not finish")
		}
		// The download sensor reads its connections at each poll: wait
		// until it has taken the connection for a download (its write
		// hooks attach then), or a few seconds of polls.
		var paths, writes int
		for i := 0; i < 150; i++ {
			if paths, writes = syscallLinks(t); writes > 0 || paths > 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		rec := s.finish(t, "go")
		t.Logf("while downloading: %d path-syscall links, %d download write-hook links; %d downloads in the record", paths, writes, len(rec.Downloads))
		if paths != 0 {
			t.Errorf("%d path-syscall links attached for a download", paths)
		}
		checkNeverOn(t, rec)
	})
	t.Run("python", func(t *testing.T) {
		dir := t.TempDir()
		code := "import json, csv, email.message, http.client, decimal, argparse, os, time\n" +
			"for i in range(200):\n    open(os.path.join(" + strconv.Quote(dir) + ", 'f%d' % i), 'w').write('x')\n" +
			"open(os.path.join(" + strconv.Quote(dir) + ", 'ready'), 'w').close()\n" +
			"while not os.path.exists(os.path.join(" + strconv.Quote(dir) + ", 'go')): time.sleep(0.02)\n"
		s := startStepped(t, dir, []string{"env", "PYTHONPYCACHEPREFIX=" + filepath.Join(dir, "pyc"), py, "-c", code})
		if !s.wait("ready") {
			s.finish(t, "go")
			t.Fatal("the Python program did not get ready")
		}
		paths, _ := syscallLinks(t)
		rec := s.finish(t, "go")
		if paths != 0 {
			t.Errorf("%d path-syscall links attached for plain Python", paths)
		}
		checkNeverOn(t, rec)
		if c := findCache(rec, "python", filepath.Join(dir, "pyc")); c == nil || c.Misses == 0 {
			t.Errorf("plain Python: bytecode cache %+v, want misses told from the page cache", c)
		}
	})
}

func checkNeverOn(t *testing.T, rec *record.Record) {
	t.Helper()
	if rec.JIT == nil {
		return // no JIT evidence at all: nothing was attached either
	}
	if len(rec.JIT.PathSyscallSpans) != 0 || !strings.HasPrefix(rec.JIT.PathSyscalls, "not traced") {
		t.Errorf("path syscalls %q, spans %+v: want never on", rec.JIT.PathSyscalls, rec.JIT.PathSyscallSpans)
	}
}

// TestPathSyscallsFollowFrameworkUse: a child whose environment names a
// Triton cache brings the path-syscall probes in (the kernel holds their
// links before it looks its cache up), they come off once it and its
// compiler are gone, and a second such child brings them back; the cold
// child's miss and the warm child's hit are both counted exactly.
func TestPathSyscallsFollowFrameworkUse(t *testing.T) {
	requireTracing(t)
	requireCC(t)
	py := realPython(t)
	script, _ := filepath.Abs("../testdata/jit/triton_like.py")
	dir := t.TempDir()
	cache := filepath.Join(dir, "triton-cache")
	child := func(step string) string {
		// The child's environment names the cache from its exec on; it
		// looks the cache up only once the test has seen the probes on.
		return fmt.Sprintf(`env TRITON_CACHE_DIR=%s sh -c '%s touch %s/on%s; waitfor %s/armed%s; exec %s %s 1 120'; `,
			cache, shWait, dir, step, dir, step, py, script)
	}
	sh := shWait + child("1") + "touch " + dir + "/off1; waitfor " + dir + "/go1; " + child("2") + "touch " + dir + "/off2; waitfor " + dir + "/go2"
	s := startStepped(t, dir, []string{"sh", "-c", sh})
	steps := []string{"armed1", "go1", "armed2", "go2"}
	full := pathSyscallTracepoints(t)
	for _, step := range []string{"1", "2"} {
		if !s.wait("on" + step) {
			s.finish(t, steps...)
			t.Fatalf("child %s did not start", step)
		}
		// The links are made concurrently: released at the first one, the
		// child could look its cache up before the rest are in.
		if n := waitLinks(t, func(n int) bool { return n == full }); n != full {
			s.finish(t, steps...)
			t.Fatalf("child %s: %d of %d path-syscall links attached for its TRITON_CACHE_DIR", step, n, full)
		}
		s.release(t, "armed"+step)
		if !s.wait("off" + step) {
			s.finish(t, steps...)
			t.Fatalf("child %s did not finish", step)
		}
		if n := waitLinks(t, func(n int) bool { return n == 0 }); n != 0 {
			s.finish(t, steps...)
			t.Fatalf("child %s gone: %d path-syscall links still attached", step, n)
		}
		s.release(t, "go"+step)
	}
	rec := s.finish(t, steps...)
	logJIT(t, rec)
	if rec.JIT == nil || len(rec.JIT.PathSyscallSpans) != 2 {
		t.Fatalf("want two intervals with the path syscalls on, got %+v", rec.JIT)
	}
	for i, sp := range rec.JIT.PathSyscallSpans {
		if sp.Off == "" || sp.ToNS <= sp.FromNS || !strings.Contains(sp.Reason, "TRITON_CACHE_DIR") {
			t.Errorf("interval %d: %+v, want on for TRITON_CACHE_DIR and off before the end", i, sp)
		}
	}
	c := findCache(rec, "triton", cache)
	if c == nil || c.Misses != 1 || c.Hits != 1 || c.Lookups != 2 || c.EntriesWritten != 1 {
		t.Errorf("triton cache %+v: want 2 lookups, 1 miss, 1 hit, 1 entry written", c)
	}
}

// pathSyscallTracepoints counts the path-syscall tracepoints this kernel
// has (entry and exit): the links the JIT sensor holds once it has
// attached them all.
func pathSyscallTracepoints(t *testing.T) int {
	t.Helper()
	var events string
	for _, dir := range []string{"/sys/kernel/tracing/events/syscalls", "/sys/kernel/debug/tracing/events/syscalls"} {
		if _, err := os.Stat(dir); err == nil {
			events = dir
			break
		}
	}
	if events == "" {
		t.Skip("no syscall tracepoints in tracefs: the path-syscall probes cannot attach")
	}
	n := 0
	for _, sc := range jit.PathSyscalls() {
		for _, dir := range []string{"enter", "exit"} {
			if _, err := os.Stat(filepath.Join(events, "sys_"+dir+"_"+sc.Name)); err == nil {
				n++
			}
		}
	}
	return n
}

// waitLinks waits (a few seconds at most: user space takes the probes
// off at its next check, within a second) until ok holds for the number of
// path-syscall links, and returns that number.
func waitLinks(t *testing.T, ok func(int) bool) int {
	t.Helper()
	var n int
	for i := 0; i < 250; i++ {
		if n, _ = syscallLinks(t); ok(n) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n
}
