package abrun

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coldtrace/coldtrace/attribution/abtest"
)

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// ABI Go supports.
const userHZ = 100

// monitor samples one run: the traced tree's summed RSS every rssEvery,
// and other processes' CPU and I/O every scanEvery.
type monitor struct {
	procRoot  string
	self      int
	rssEvery  time.Duration
	scanEvery time.Duration

	mu         sync.Mutex
	root       int // the command's pid, 0 until released
	releasedAt time.Time
	tree       map[int]bool // every pid ever seen in the traced tree
	peakRSS    uint64
	prev       map[int]proc
	prevAt     time.Time
	started    time.Time
	ticks      uint64
	ioBytes    uint64
	peakCPU    float64
	samples    int
	perPID     map[int]uint64
	comms      map[int]string
	stop       chan struct{}
	done       sync.WaitGroup
	pageSize   uint64
}

func newMonitor(procRoot string, rssEvery, scanEvery time.Duration) *monitor {
	return &monitor{
		procRoot: procRoot, self: os.Getpid(), rssEvery: rssEvery, scanEvery: scanEvery,
		tree: map[int]bool{}, perPID: map[int]uint64{}, comms: map[int]string{},
		stop: make(chan struct{}), pageSize: uint64(os.Getpagesize()),
	}
}

// start takes the first scan and starts sampling.
func (m *monitor) start() {
	m.prev, m.prevAt = scan(m.procRoot), time.Now()
	m.started = m.prevAt
	m.done.Add(2)
	go m.rssLoop()
	go m.loop(m.scanEvery, m.sampleOthers)
}

// released records the command's pid (trace.Options.OnStart); it must
// not block the tracer.
func (m *monitor) released(pid int) {
	m.mu.Lock()
	m.root = pid
	m.releasedAt = time.Now()
	m.tree[pid] = true
	m.mu.Unlock()
}

func (m *monitor) loop(every time.Duration, f func()) {
	defer m.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			f()
		}
	}
}

// rssLoop samples the tree's RSS every 10 ms until 100 ms after the
// release, then every rssEvery: a command of a few tens of milliseconds
// gets samples too.
func (m *monitor) rssLoop() {
	defer m.done.Done()
	for {
		m.mu.Lock()
		early := m.root == 0 || time.Since(m.releasedAt) < 100*time.Millisecond
		m.mu.Unlock()
		wait := m.rssEvery
		if early {
			wait = min(wait, 10*time.Millisecond)
		}
		select {
		case <-m.stop:
			return
		case <-time.After(wait):
			m.sampleRSS()
		}
	}
}

// finish stops sampling and takes the last scan, with traced (every pid
// the record knows) left out.
func (m *monitor) finish(traced []int) abtest.Interference {
	close(m.stop)
	m.done.Wait()
	m.mu.Lock()
	for _, pid := range traced {
		m.tree[pid] = true
	}
	m.mu.Unlock()
	m.sampleOthers()
	m.mu.Lock()
	defer m.mu.Unlock()
	secs := m.prevAt.Sub(m.started).Seconds()
	in := abtest.Interference{Samples: m.samples, CPUPeak: m.peakCPU, IOBytes: m.ioBytes}
	if secs > 0 {
		in.CPUMean = float64(m.ticks) / userHZ / secs
		in.IORate = float64(m.ioBytes) / secs
		in.Top = topBusy(m.perPID, m.comms, secs, userHZ, 3)
	}
	return in
}

// sampleRSS adds the tree's current RSS; the tree is found by walking
// /proc/PID/task/TID/children from the command down, which costs far
// less than a scan of every process.
func (m *monitor) sampleRSS() {
	m.mu.Lock()
	root := m.root
	m.mu.Unlock()
	if root == 0 {
		return
	}
	seen := map[int]bool{}
	var rss uint64
	var walk func(pid int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		rss += m.residentBytes(pid)
		tasks, _ := os.ReadDir(filepath.Join(m.procRoot, strconv.Itoa(pid), "task"))
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join(m.procRoot, strconv.Itoa(pid), "task", t.Name(), "children"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					walk(c)
				}
			}
		}
	}
	walk(root)
	m.mu.Lock()
	for pid := range seen {
		m.tree[pid] = true
	}
	m.peakRSS = max(m.peakRSS, rss)
	m.mu.Unlock()
}

// residentBytes is /proc/PID/statm's resident field in bytes.
func (m *monitor) residentBytes(pid int) uint64 {
	b, err := os.ReadFile(filepath.Join(m.procRoot, strconv.Itoa(pid), "statm"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * m.pageSize
}

// sampleOthers scans every process and adds what those outside the
// traced tree (and outside coldtrace) used since the previous scan.
func (m *monitor) sampleOthers() {
	cur, now := scan(m.procRoot), time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	exclude := treeOf(cur, m.tree)
	exclude[m.self] = true
	for pid := range m.tree {
		exclude[pid] = true
	}
	ticks, io, per := others(m.prev, cur, exclude)
	if secs := now.Sub(m.prevAt).Seconds(); secs > 0 {
		m.peakCPU = max(m.peakCPU, float64(ticks)/userHZ/secs)
	}
	m.ticks += ticks
	m.ioBytes += io
	for pid, t := range per {
		m.perPID[pid] += t
		m.comms[pid] = cur[pid].comm
	}
	m.samples++
	m.prev, m.prevAt = cur, now
}
