package download

import (
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	"github.com/coldtrace/coldtrace/internal/testenv"
)

// pidfdThread is PIDFD_THREAD (O_EXCL): a pidfd for one thread, not a
// thread group (Linux 6.9).
const pidfdThread = unix.O_EXCL

// receive connects to a local server that sends n messages of size
// bytes, and reads them one receive each, on the calling thread, each
// answered with ack bytes. It returns the bytes read; before it closes
// the connection, it calls check.
func receive(t *testing.T, n, size, ack int, check func()) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		msg := make([]byte, size)
		answer := make([]byte, ack)
		for range n {
			if _, err := c.Write(msg); err != nil {
				return
			}
			// One message in flight, so that each receive returns one.
			if _, err := io.ReadFull(c, answer); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, max(size, ack))
	got := 0
	for range n {
		k, err := io.ReadFull(c, buf[:size])
		got += k
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if _, err := c.Write(buf[:ack]); err != nil {
			t.Fatal(err)
		}
	}
	check()
	return got
}

// startSensor opens and starts the download sensor on maps standing in
// for the core's; both are closed when the test ends.
func startSensor(t *testing.T) (*Sensor, Options) {
	t.Helper()
	shared := sharedMaps(t)
	s, err := Prepare(shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s, shared
}

// trackThread puts the calling thread, which the caller has locked to its
// goroutine, into the tracked set (slot 1) until the returned function
// runs.
func trackThread(t *testing.T, shared Options) (untrack func()) {
	t.Helper()
	return trackThreadIn(t, shared, 1)
}

// trackThreadIn is trackThread with the thread's slot.
func trackThreadIn(t *testing.T, shared Options, slot uint32) (untrack func()) {
	t.Helper()
	fd, err := unix.PidfdOpen(unix.Gettid(), pidfdThread)
	if err != nil {
		t.Skipf("pidfd of a thread: %v", err)
	}
	st := bpfdl.DownloadTstate{Slot: slot, Tgid: uint32(unix.Getpid())}
	markTracked(t, shared.Tracked, uint32(unix.Getpid()))
	if err := shared.TaskStates.Update(uint32(fd), &st, ebpf.UpdateAny); err != nil {
		unix.Close(fd)
		t.Fatalf("track this thread: %v", err)
	}
	return func() {
		shared.TaskStates.Delete(uint32(fd))
		unix.Close(fd)
	}
}

// runStats is one program's run count and time so far.
func runStats(t *testing.T, p *ebpf.Program) (uint64, time.Duration) {
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.RunCount, st.Runtime
}

// TestPerEventCost measures the receive probe on an untracked thread
// (what every socket read on the machine pays) and on a tracked thread
// receiving on a connection it opened, and checks the tracked one's
// bytes. Other tests on the machine add their own receives to the counts:
// the figures are logged, not asserted.
func TestPerEventCost(t *testing.T) {
	testenv.RequireTracing(t)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("enable bpf_stats: %v", err)
	}
	defer stats.Close()
	s, shared := startSensor(t)
	const n, size = 20000, 64

	// An empty program on the same tracepoint: what bpf_stats itself
	// adds to each run (two clock reads), to subtract from the figures.
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp,
		AttachTo: "sock_recv_length", License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatalf("load an empty program: %v", err)
	}
	defer empty.Close()
	emptyLink, err := link.AttachTracing(link.TracingOptions{Program: empty})
	if err != nil {
		t.Fatalf("attach an empty program: %v", err)
	}
	defer emptyLink.Close()

	measure := func(name string, tracked bool) (runs uint64, total time.Duration) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if tracked {
			defer trackThread(t, shared)()
		}
		c0, r0 := runStats(t, s.objs.OnRecv)
		ec0, er0 := runStats(t, empty)
		check := func() {
			// An open connection is in the table; only the tracked
			// thread's counts, with every byte it received.
			var mine []Conn
			if err := s.eachOpenConn(func(raw *bpfdl.DownloadConn) {
				if c := decodeConn(raw); c.PID == int32(unix.Getpid()) {
					mine = append(mine, c)
				}
			}); err != nil {
				t.Fatal(err)
			}
			if tracked && (len(mine) != 1 || mine[0].Bytes != n*size || mine[0].Receives != n) {
				t.Errorf("%s: connections of this process: %+v", name, mine)
			}
			if !tracked && len(mine) != 0 {
				t.Errorf("%s: connections of this process: %+v", name, mine)
			}
		}
		if got := receive(t, n, size, 1, check); got != n*size {
			t.Fatalf("read %d bytes, want %d", got, n*size)
		}
		c1, r1 := runStats(t, s.objs.OnRecv)
		if c1-c0 < n {
			t.Errorf("%s: on_recv ran %d times for %d receives", name, c1-c0, n)
		}
		ec1, er1 := runStats(t, empty)
		t.Logf("%s: on_recv %d runs, %.0f ns/run; an empty program %.0f ns/run", name,
			c1-c0, float64((r1-r0).Nanoseconds())/float64(c1-c0), float64((er1-er0).Nanoseconds())/float64(max(ec1-ec0, 1)))
		return c1 - c0, r1 - r0
	}
	baseRuns, baseTime := measure("untracked thread", false)
	runs, total := measure("tracked thread, its own connection", true)
	// The same exchange both times: the extra time is the n tracked
	// receives' (the server's receives and the empty reads stay untracked).
	perRun := float64(baseTime.Nanoseconds()) / float64(baseRuns)
	extra := float64(total.Nanoseconds()) - perRun*float64(runs)
	t.Logf("a tracked receive on its connection: about %.0f ns", perRun+extra/n)
}

// TestDownloadSaidOnceShapedAndNoSyscallProbe: a ping-pong of small
// messages that passes downloadBytes is no download; a download-shaped
// receive is said at the first poll after it; and neither attaches a
// syscall tracepoint (paid by every task of the machine): the sensor's
// links are BTF tracepoints (raw tracepoint links), no perf events.
func TestDownloadSaidOnceShapedAndNoSyscallProbe(t *testing.T) {
	testenv.RequireTracing(t)
	s, shared := startSensor(t)
	var said []int32
	s.onDownload = func(pid int32) { said = append(said, pid) }
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer trackThread(t, shared)()
	poll := func() {
		if err := s.Poll(monotonicNS(), nil); err != nil {
			t.Fatal(err)
		}
	}
	// 64-byte messages answered in kind: 2.5 MiB received, as much sent.
	const n, size = 40000, 64
	receive(t, n, size, size, poll)
	if len(said) != 0 {
		t.Fatalf("a ping-pong of %d-byte messages (%d bytes each way) was said to be a download", size, n*size)
	}
	// A small request, a large answer: 2 MiB in 64 KiB receives.
	receive(t, 32, 64<<10, 1, poll)
	if len(said) != 1 || said[0] != int32(unix.Getpid()) {
		t.Fatalf("a 2 MiB download-shaped receive was said %v times (pids %v), want once, of this process", len(said), said)
	}
	for _, l := range s.links {
		info, err := l.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Type == link.PerfEventType {
			t.Errorf("the network sensor holds a perf-event link (a classic tracepoint or kprobe): want BTF tracepoints only")
		}
	}
}
