package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// progStat is one BPF program's cost over a traced run.
type progStat struct {
	Name      string  `json:"name"`
	Runs      uint64  `json:"runs"`
	RunTimeNS uint64  `json:"run_time_ns"`
	NSPerRun  float64 `json:"ns_per_run"`
	// ShareOfWall is the program's run time over the workload's wall time
	// (both CPUs together can exceed 1).
	ShareOfWall     float64 `json:"share_of_wall"`
	RecursionMisses uint64  `json:"recursion_misses,omitempty"`
}

// progCapture finds the BPF programs a coldtrace process loads, through
// its /proc/PID/fdinfo, and holds a reference to each: the programs then
// outlive coldtrace (detached, so they run no more) and their run counts
// and run times can be read after it exits. Statistics are on
// (BPF_ENABLE_STATS) from newProgCapture to close.
type progCapture struct {
	statsFD io.Closer
	mu      sync.Mutex
	progs   map[ebpf.ProgramID]*ebpf.Program
	done    chan struct{}
	wg      sync.WaitGroup
}

func newProgCapture() (*progCapture, error) {
	fd, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enable BPF run-time statistics: %w", err)
	}
	return &progCapture{statsFD: fd, progs: map[ebpf.ProgramID]*ebpf.Program{}}, nil
}

// watch polls pid's descriptors until the workload's start time (by then
// coldtrace has attached everything and released the command).
func (c *progCapture) watch(pid int, untilMono int64) {
	c.done = make(chan struct{})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		checked := map[string]bool{}
		for {
			c.scan(pid, checked)
			if monoNS() > untilMono {
				return
			}
			select {
			case <-c.done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
}

func (c *progCapture) scan(pid int, checked map[string]bool) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || link != "anon_inode:bpf-prog" {
			continue
		}
		key := e.Name() + "\x00" + link
		if checked[key] {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
		if err != nil {
			continue
		}
		checked[key] = true
		for _, l := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(l, "prog_id:"); ok {
				id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
				if err != nil {
					break
				}
				c.mu.Lock()
				if c.progs[ebpf.ProgramID(id)] == nil {
					if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
						c.progs[ebpf.ProgramID(id)] = p
					}
				}
				c.mu.Unlock()
			}
		}
	}
}

func (c *progCapture) stop() {
	if c.done != nil {
		close(c.done)
		c.wg.Wait()
		c.done = nil
	}
}

// results reads the held programs' statistics, by program name, costliest
// first.
func (c *progCapture) results(wallNS int64) []progStat {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := map[string]*progStat{}
	for _, p := range c.progs {
		name := fmt.Sprint(p)
		if info, err := p.Info(); err == nil && info.Name != "" {
			name = info.Name
		}
		st, err := p.Stats()
		if err != nil {
			continue
		}
		s := by[name]
		if s == nil {
			s = &progStat{Name: name}
			by[name] = s
		}
		s.Runs += st.RunCount
		s.RunTimeNS += uint64(st.Runtime.Nanoseconds())
		s.RecursionMisses += st.RecursionMisses
	}
	var out []progStat
	for _, s := range by {
		if s.Runs > 0 {
			s.NSPerRun = float64(s.RunTimeNS) / float64(s.Runs)
		}
		if wallNS > 0 {
			s.ShareOfWall = float64(s.RunTimeNS) / float64(wallNS)
		}
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RunTimeNS > out[j].RunTimeNS })
	return out
}

func (c *progCapture) close() {
	c.stop()
	c.mu.Lock()
	for id, p := range c.progs {
		p.Close()
		delete(c.progs, id)
	}
	c.mu.Unlock()
	c.statsFD.Close()
}
