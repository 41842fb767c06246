package download

import (
	"fmt"
	"time"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// A short download into tmpfs can open, write and close its file between
// two of the session's polls (100 ms): a 12 MiB body over loopback fetched
// in four connections took under 100 ms, and the polls, which list a
// process's open files only then, saw no file: the body was called "kept
// in memory". While a connection is receiving, a watcher lists the
// receiving processes' open files and reads the tmpfs files' sizes every
// fastInterval instead. Between downloads it reads one per-CPU counter
// (the tables' write count) per tick: nothing runs in, or is added to,
// any traced or untraced process.

// fastInterval is the watcher's tick while connections receive.
const fastInterval = 5 * time.Millisecond

// idleInterval is its tick while nothing receives but a tracked
// connection is open: the first 10 ms of a download go unlisted at most.
// While none is open it waits for the kernel's note that one opened
// (bpf/download's conn_wake): a tick every 10 ms for the whole run cost
// some 400 thread switches a second (the Go runtime's monitor thread's
// included) to runs that never open a connection.
const idleInterval = 10 * time.Millisecond

// connWakeLook is how often the conn_wake ring is looked at without a
// wake-up (each of its records comes with one); connWakeIdle how long
// that look may grow while it stays empty.
const (
	connWakeLook = time.Second
	connWakeIdle = 10 * time.Second
)

// listings are the spans in which a process's open files were listed
// every tick (ns from the run's start): a download whose receive span
// held no listing of its process may have written a tmpfs file no poll
// saw.
type listings map[int32][][2]int64

// add notes a listing of pid at t; one within mergeGap of the last span
// extends it.
func (l listings) add(pid int32, t int64) {
	const mergeGap = int64(4 * fastInterval)
	s := l[pid]
	if n := len(s); n > 0 && t-s[n-1][1] <= mergeGap {
		s[n-1][1] = max(s[n-1][1], t)
		return
	}
	l[pid] = append(s, [2]int64{t, t})
}

// during reports whether pid's files were listed within [from, to].
func (l listings) during(pid int32, from, to int64) bool {
	for _, s := range l[pid] {
		if s[0] <= to && s[1] >= from {
			return true
		}
	}
	return false
}

// startConnWake starts reading conn_wake: each record signals opened.
func (s *Sensor) startConnWake() error {
	s.opened = make(chan struct{}, 1)
	wake, err := probe.StartRing(s.objs.ConnWake, connWakeLook, connWakeIdle, func([]byte) {
		select {
		case s.opened <- struct{}{}:
		default: // one is waiting already
		}
	})
	if err != nil {
		return fmt.Errorf("open connection wake-up ring buffer: %w", err)
	}
	s.connWake = wake
	return nil
}

// startWatch starts the watcher; stopWatch ends it and waits for it.
func (s *Sensor) startWatch() {
	if s.watchStop != nil {
		return
	}
	s.watchStop, s.watchDone = make(chan struct{}), make(chan struct{})
	go s.watch()
}

func (s *Sensor) stopWatch() {
	if s.watchStop == nil {
		return
	}
	close(s.watchStop)
	<-s.watchDone
	s.watchStop = nil
}

// idleWait is the watcher's wait while nothing receives: idleInterval
// while a tracked connection is open (or the count cannot be read), else
// 0: until one opens.
func (s *Sensor) idleWait() time.Duration {
	var n int64
	if err := s.objs.OpenConns.Lookup(uint32(0), &n); err != nil || n > 0 {
		return idleInterval
	}
	return 0
}

func (s *Sensor) watch() {
	defer close(s.watchDone)
	var seen uint64
	bytes := map[uint64]uint64{} // each connection's bytes at the last look
	wait := s.idleWait()
	for {
		if wait == 0 {
			select {
			case <-s.watchStop:
				return
			case <-s.opened:
			}
			wait = idleInterval
		}
		select {
		case <-s.watchStop:
			return
		case <-time.After(wait):
		}
		writes, err := probe.SumPerCPU(s.objs.TableWrites, 0)
		if err != nil || writes == seen {
			wait = s.idleWait()
			continue
		}
		seen = writes
		active := s.receiving(bytes)
		wait = s.idleWait()
		if len(active) == 0 {
			continue
		}
		wait = fastInterval
		s.fdMu.Lock()
		for pid := range active {
			s.handles.TakeOpen(pid)
			s.tmpfs.watch(pid, s.openNames)
			s.listed.add(pid, s.sinceStart())
		}
		s.tmpfs.poll()
		s.fdMu.Unlock()
	}
}

// receiving is the processes whose download-shaped connections received
// since the last look (bytes: each connection's count then, updated).
func (s *Sensor) receiving(bytes map[uint64]uint64) map[int32]bool {
	active := map[int32]bool{}
	live := make(map[uint64]bool, len(bytes))
	err := s.eachOpenConn(func(raw *bpfdl.DownloadConn) {
		id := raw.Id
		live[id] = true
		// As the polls' walk: a connection that looks like (part of) a
		// download, not chatter, whose bytes moved.
		if raw.Bytes > bytes[id] && raw.Bytes >= minPartBytes {
			if c := decodeConn(raw); c.downloadShaped() {
				active[c.PID] = true
			}
		}
		bytes[id] = raw.Bytes
	})
	if err != nil {
		return active // the poll's walk reads the same table and reports it
	}
	for id := range bytes {
		if !live[id] {
			delete(bytes, id)
		}
	}
	return active
}
