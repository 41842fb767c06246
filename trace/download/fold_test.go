package download

import (
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	"github.com/coldtrace/coldtrace/internal/testenv"
)

// onThread runs functions on one locked OS thread, tracked in slot, until
// the test ends; tid is that thread's.
func onThread(t *testing.T, shared Options, slot uint32) (run func(func()), tid int32) {
	t.Helper()
	work := make(chan func())
	ready := make(chan int32)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		untrack := trackThreadIn(t, shared, slot)
		defer untrack()
		ready <- int32(unix.Gettid())
		for f := range work {
			f()
			done <- struct{}{}
		}
	}()
	tid = <-ready
	t.Cleanup(func() { close(work) })
	return func(f func()) {
		work <- f
		<-done
	}, tid
}

// askServer listens on loopback and answers each 4-byte request n with n
// bytes, on every connection it accepts.
func askServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var req [4]byte
				for {
					if _, err := io.ReadFull(c, req[:]); err != nil {
						return
					}
					if _, err := c.Write(make([]byte, binary.LittleEndian.Uint32(req[:]))); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// fetch asks c for n bytes and reads them, in receives of at most
// 256 KiB.
func fetch(t *testing.T, c net.Conn, n int) {
	var req [4]byte
	binary.LittleEndian.PutUint32(req[:], uint32(n))
	if _, err := c.Write(req[:]); err != nil {
		t.Errorf("request: %v", err)
		return
	}
	buf := make([]byte, 256<<10)
	for got := 0; got < n; {
		k, err := c.Read(buf[:min(len(buf), n-got)])
		if err != nil {
			t.Errorf("receive: %v", err)
			return
		}
		got += k
	}
}

// openConns is the table's connections (with what their latest receiving
// thread's slot holds for them) by peer port.
func openConns(t *testing.T, s *Sensor) map[uint16]Conn {
	t.Helper()
	byPort := map[uint16]Conn{}
	if err := s.eachOpenConn(func(raw *bpfdl.DownloadConn) {
		c := decodeConn(raw)
		byPort[c.Peer.Port()] = c
	}); err != nil {
		t.Fatal(err)
	}
	return byPort
}

// TestReceivesCountWhicheverThreadReceives: receives count in the
// receiving thread's slot until another thread receives on the
// connection, or the thread on another, or the connection closes. Two
// threads take turns on one connection, one of them also on a second;
// each connection's bytes and latest receiving thread, while open (its
// entry and its latest receiver's slot) and once closed (the close's
// report), are what was asked for, to the byte.
func TestReceivesCountWhicheverThreadReceives(t *testing.T) {
	testenv.RequireTracing(t)
	s, shared := startSensor(t)
	addr1, addr2 := askServer(t), askServer(t)
	a, tidA := onThread(t, shared, 1)
	b, tidB := onThread(t, shared, 2)
	var c1, c2 net.Conn
	a(func() {
		var err error
		if c1, err = net.Dial("tcp", addr1); err != nil {
			t.Fatal(err)
		}
		if c2, err = net.Dial("tcp", addr2); err != nil {
			t.Fatal(err)
		}
	})
	p1, p2 := uint16(c1.RemoteAddr().(*net.TCPAddr).Port), uint16(c2.RemoteAddr().(*net.TCPAddr).Port)
	want := map[uint16]uint64{}
	last := map[uint16]int32{}
	// Sizes that are not multiples of the reads; turns of every kind: a
	// then b on c1, a on c2 between, b twice in a row, b on c2 after a.
	turns := []struct {
		on   func(func())
		tid  int32
		c    *net.Conn
		port uint16
		n    int
	}{
		{a, tidA, &c1, p1, 1_000_003}, {b, tidB, &c1, p1, 777}, {a, tidA, &c2, p2, 500_000},
		{a, tidA, &c1, p1, 1}, {b, tidB, &c1, p1, 2_500_000}, {b, tidB, &c1, p1, 3},
		{a, tidA, &c2, p2, 1_234_567}, {b, tidB, &c2, p2, 409_700}, {a, tidA, &c1, p1, 999_999},
	}
	for i, tr := range turns {
		tr.on(func() { fetch(t, *tr.c, tr.n) })
		want[tr.port] += uint64(tr.n)
		last[tr.port] = tr.tid
		open := openConns(t, s)
		for _, p := range []uint16{p1, p2} {
			if c := open[p]; c.Bytes != want[p] || (want[p] > 0 && c.RxTID != last[p]) {
				t.Errorf("after turn %d: connection to port %d: %d bytes by thread %d, want %d by %d",
					i+1, p, c.Bytes, c.RxTID, want[p], last[p])
			}
		}
	}
	a(func() {
		c1.Close()
		c2.Close()
	})
	// The closes take the entries out of the table and report them.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		open := openConns(t, s)
		if _, ok := open[p1]; !ok {
			if _, ok := open[p2]; !ok {
				break
			}
		}
	}
	conns, _, err := s.collect()
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint16]Conn{}
	for _, c := range conns {
		got[c.Peer.Port()] = c
	}
	for _, p := range []uint16{p1, p2} {
		if c, ok := got[p]; !ok || c.EndTS == 0 || c.Bytes != want[p] || c.RxTID != last[p] {
			t.Errorf("closed connection to port %d: %+v, want %d bytes, the latest by thread %d", p, c, want[p], last[p])
		}
	}
}
