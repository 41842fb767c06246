package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	bpfevict "github.com/coldtrace/coldtrace/bpf/evict"
	bpfjit "github.com/coldtrace/coldtrace/bpf/jit"
	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	bpfsched "github.com/coldtrace/coldtrace/bpf/sched"
	"github.com/coldtrace/coldtrace/trace/pagecache"
)

// beside is a situation running beside the loops.
type beside struct {
	ct     *exec.Cmd // coldtrace (nil for the floor)
	target int       // the process whose end ends the trace (0: none)
	attach *exec.Cmd // the process coldtrace attached to
	floor  []io.Closer
	progs  []*ebpf.Program // the floor's programs, for their statistics
}

// stop ends the situation: the traced command ends (coldtrace then
// writes its record and exits), or coldtrace attach is interrupted.
func (b *beside) stop() {
	closeAll(b.floor)
	if b.ct == nil {
		return
	}
	if b.attach != nil {
		_ = b.ct.Process.Signal(os.Interrupt)
	} else if b.target > 0 {
		_ = syscall.Kill(b.target, syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() { _ = b.ct.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = b.ct.Process.Kill()
		<-done
	}
	if b.attach != nil {
		_ = b.attach.Process.Kill()
		_ = b.attach.Wait()
	}
}

// situations are what the loops run beside; -smoke keeps a traced shell
// and the floor.
func situations(smoke bool) []situation {
	all := []situation{
		{Name: "floor", Title: "empty BPF programs on coldtrace's tracepoints", start: startFloor},
		{Name: "shell", Title: "coldtrace tracing a shell (sleep)", start: traced("shell")},
		{Name: "python", Title: "coldtrace tracing a Python program", start: traced("python")},
		{Name: "download", Title: "coldtrace tracing a loopback download (then idle)", start: traced("download")},
		{Name: "attach", Title: "coldtrace attach to a sleeping process", start: startAttach},
		{Name: "framework", Title: "coldtrace tracing a framework's process (TRITON_CACHE_DIR set: path-syscall probes on)",
			PathSyscalls: true, start: traced("framework")},
		{Name: coldRead, Title: "coldtrace tracing a shell that read a cold file (sleep: the read exits off again)", start: traced(coldRead)},
	}
	if smoke {
		return all[:2]
	}
	return all
}

// readyScript writes the process's pid to READY (through a rename, so
// that it is read whole) and sleeps.
const pyReady = `
import os, sys, time
ready = sys.argv[1]
with open(ready + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(ready + ".tmp", ready)
time.sleep(3600)
`

// pyDownload downloads from ADDR into DIR/model.bin, keeps the
// connection open, then does as pyReady.
const pyDownload = `
import os, socket, sys, time
ready, addr = sys.argv[1], sys.argv[2]
host, port = addr.rsplit(":", 1)
s = socket.create_connection((host, int(port)))
with open(os.path.join(os.path.dirname(ready), "model.bin"), "wb") as f:
    while True:
        b = s.recv(256 << 10)
        if not b:
            break
        f.write(b)
with open(ready + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(ready + ".tmp", ready)
time.sleep(3600)
`

// coldRead is the situation of a traced shell that read a cold file
// before it slept: on kernels that refuse task works its first fill put
// the read exits' syscall tracepoints on, which slow every system call
// of the machine as the path-syscall probes do, until no fill has been
// seen for pagecache.ReadExitsQuiet. The loops run once they are off.
const coldRead = "cold-read"

// coldFileBytes is the size of the file coldRead reads.
const coldFileBytes = 16 << 20

// traced starts coldtrace on a command of the given kind.
func traced(kind string) func(c *collateral) (*beside, error) {
	return func(c *collateral) (*beside, error) {
		c.seq++
		dir := filepath.Join(c.dir, fmt.Sprintf("beside-%d", c.seq))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		ready := filepath.Join(dir, "ready")
		sh := `echo $$ > ` + ready + `.tmp && mv ` + ready + `.tmp ` + ready + ` && exec sleep 3600`
		var command, flags []string
		switch kind {
		case "shell":
			command = []string{"sh", "-c", sh}
		case coldRead:
			file := filepath.Join(dir, "cold.bin")
			if err := writeCold(file, coldFileBytes); err != nil {
				return nil, err
			}
			command = []string{"sh", "-c", `cat "$1" >/dev/null && ` + sh, "sh", file}
		case "python":
			command = []string{python, "-c", pyReady, ready}
		case "download":
			addr, stop, err := serveOnce(64 << 20)
			if err != nil {
				return nil, err
			}
			defer stop()
			command = []string{python, "-c", pyDownload, ready, addr}
		case "framework":
			command = []string{"env", "TRITON_CACHE_DIR=" + filepath.Join(dir, "triton"), "sh", "-c", sh}
		}
		argv := append(append(append([]string{c.o.coldtrace, "-q", "--json", filepath.Join(dir, "summary.json")}, c.o.ctArgs...), flags...), "--")
		ct := exec.Command(argv[0], append(argv[1:], command...)...)
		ct.Env = c.env
		if err := ct.Start(); err != nil {
			return nil, fmt.Errorf("start coldtrace: %w", err)
		}
		b := &beside{ct: ct}
		pid, err := waitReady(ready, ct)
		if err != nil {
			b.stop()
			return nil, err
		}
		b.target = pid
		switch kind {
		case "download":
			// The download sensor takes the connection for a download at
			// its next poll (every 100 ms), and attaches what follows.
			time.Sleep(300 * time.Millisecond)
		case coldRead:
			// The read exits (coldtrace's only perf events here) come
			// off a quiet spell after the last fill.
			if err := waitNoPerfEvents(ct.Process.Pid, pagecache.ReadExitsQuiet*10); err != nil {
				b.stop()
				return nil, err
			}
		}
		settleLinks(ct.Process.Pid)
		return b, nil
	}
}

// writeCold writes n bytes to path, on disk, and drops them from the
// page cache.
func writeCold(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, n)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evict %s: %w", path, err)
	}
	return nil
}

// startAttach starts a sleeping process and coldtrace attach on it.
func startAttach(c *collateral) (*beside, error) {
	target := exec.Command("sleep", "3600")
	if err := target.Start(); err != nil {
		return nil, err
	}
	c.seq++
	out := filepath.Join(c.dir, fmt.Sprintf("attach-%d.json", c.seq))
	argv := append(append([]string{c.o.coldtrace, "attach", "-q", "--json", out}, c.o.ctArgs...), "--pid", strconv.Itoa(target.Process.Pid))
	ct := exec.Command(argv[0], argv[1:]...)
	ct.Env = c.env
	if err := ct.Start(); err != nil {
		_ = target.Process.Kill()
		_ = target.Wait()
		return nil, fmt.Errorf("start coldtrace attach: %w", err)
	}
	b := &beside{ct: ct, attach: target}
	time.Sleep(100 * time.Millisecond)
	settleLinks(ct.Process.Pid)
	return b, nil
}

// waitReady waits for the traced command to write its pid to ready.
func waitReady(ready string, ct *exec.Cmd) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ready); err == nil {
			return strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if ct.ProcessState != nil {
			return 0, errors.New("coldtrace ended before its command was ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, fmt.Errorf("the traced command was not ready within 30 s (%s)", ready)
}

// settleLinks waits until the number of BPF links pid holds has not
// changed for 200 ms (10 s at most): everything is attached.
func settleLinks(pid int) {
	last, since := -1, time.Now()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		n := countLinks(pid)
		if n != last {
			last, since = n, time.Now()
			continue
		}
		if n > 0 && time.Since(since) >= 200*time.Millisecond {
			return
		}
	}
}

func countLinks(pid int) int {
	return countFDs(pid, "anon_inode:bpf_link", "anon_inode:[perf_event]")
}

// countFDs counts pid's descriptors that link to one of targets.
func countFDs(pid int, targets ...string) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && slices.Contains(targets, t) {
			n++
		}
	}
	return n
}

// waitNoPerfEvents waits until pid holds no perf event, for at most
// limit.
func waitNoPerfEvents(pid int, limit time.Duration) error {
	for start := time.Now(); countFDs(pid, "anon_inode:[perf_event]") > 0; time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > limit {
			return fmt.Errorf("coldtrace (pid %d) still holds perf events (the read exits) %v after the traced read", pid, limit)
		}
	}
	return nil
}

// serveOnce serves size bytes to one loopback connection, then waits for
// the client to close it.
func serveOnce(size int) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 256<<10)
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				break
			}
		}
		c.Close()
	}()
	return ln.Addr().String(), func() { ln.Close() }, nil
}

// floorTracepoints are the tp_btf attach points of coldtrace's programs,
// one per attached program (a tracepoint with three programs gets three).
// The programs the page cache's insertion program runs by tail call
// (trace/pagecache: Chain) are not attached.
func floorTracepoints() ([]string, error) {
	chained := map[string]bool{bpfevict.EvictProgOnOtherInsert: true, bpfdl.DownloadProgOnDlWrite: true}
	loads := []func() (*ebpf.CollectionSpec, error){bpfsched.LoadSched, bpfpc.LoadPagecache, bpfevict.LoadEvict, bpfdl.LoadDownload, bpfjit.LoadJit}
	var out []string
	for _, load := range loads {
		spec, err := load()
		if err != nil {
			return nil, err
		}
		for name, p := range spec.Programs {
			if tp, ok := strings.CutPrefix(p.SectionName, "tp_btf/"); ok && !chained[name] {
				out = append(out, tp)
			}
		}
	}
	return out, nil
}

// startFloor attaches an empty program (r0 = 0; exit) to each of
// coldtrace's tracepoints: what any tracer there costs at the least.
func startFloor(*collateral) (*beside, error) {
	fl, err := loadFloor()
	if err != nil {
		return nil, err
	}
	b := &beside{progs: fl.progs}
	for _, p := range fl.progs {
		b.floor = append(b.floor, p)
	}
	links, err := fl.attach()
	if err != nil {
		b.stop()
		return nil, err
	}
	b.floor = append(b.floor, links...)
	return b, nil
}

// floorSet is an empty program for each of coldtrace's tracepoints.
type floorSet struct {
	tps   []string
	progs []*ebpf.Program
}

// loadFloor loads an empty program (r0 = 0; exit) for each of
// coldtrace's tracepoints (floorTracepoints), not attached.
func loadFloor() (*floorSet, error) {
	tps, err := floorTracepoints()
	if err != nil {
		return nil, err
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("kernel BTF: %w", err)
	}
	fl := &floorSet{tps: tps}
	for _, tp := range tps {
		spec := &ebpf.ProgramSpec{Name: "floor", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: tp,
			License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}}
		p, err := ebpf.NewProgramWithOptions(spec, ebpf.ProgramOptions{KernelTypes: kernel})
		if err != nil {
			fl.close()
			return nil, fmt.Errorf("load an empty program for %s: %w", tp, err)
		}
		fl.progs = append(fl.progs, p)
	}
	return fl, nil
}

// attach attaches the floor's programs; closing the links returned takes
// them off again.
func (fl *floorSet) attach() ([]io.Closer, error) {
	var links []io.Closer
	for i, p := range fl.progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			closeAll(links)
			return nil, fmt.Errorf("attach an empty program to %s: %w", fl.tps[i], err)
		}
		links = append(links, l)
	}
	return links, nil
}

// close unloads the programs.
func (fl *floorSet) close() { closeAll(fl.progs) }

// closeAll closes each of cs, the last first.
func closeAll[C io.Closer](cs []C) {
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i].Close()
	}
}

// statsPass runs each loop once more beside s with BPF run-time
// statistics on (they cost every program two clock reads, so the pairs
// run without them) and returns each program's runs and time.
func (c *collateral) statsPass(s situation) ([]progStat, error) {
	capt, err := newProgCapture()
	if err != nil {
		return nil, err
	}
	defer capt.close()
	b, err := s.start(c)
	if err != nil {
		return nil, err
	}
	if b.ct != nil {
		capt.scan(b.ct.Process.Pid, map[string]bool{})
	}
	for _, p := range b.progs {
		if q, err := p.Clone(); err == nil {
			if info, err := q.Info(); err == nil {
				if id, ok := info.ID(); ok {
					capt.mu.Lock()
					capt.progs[id] = q
					capt.mu.Unlock()
					continue
				}
			}
			q.Close()
		}
	}
	t0 := monoNS()
	for j := range c.loops {
		if _, err := c.runLoop(&c.loops[j]); err != nil {
			b.stop()
			return nil, err
		}
	}
	wall := monoNS() - t0
	b.stop()
	return capt.results(wall), nil
}
