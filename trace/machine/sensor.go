package machine

import (
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/procfs"

	"github.com/coldtrace/coldtrace/record"
)

// TopOthers is how many names of other processes the record keeps.
const TopOthers = 5

// cgroupRescan: every this many polls the live processes' cgroups are
// read again (a process may move after its first sight).
const cgroupRescan = 10

// Options connect the sensor to the run.
type Options struct {
	// Traced says whether a process was part of the run.
	Traced func(pid int32) bool
	// LivePIDs lists the run's live processes.
	LivePIDs func() ([]int, error)
	// Proc is the procfs mount point ("/proc" when empty); Sys the sysfs
	// one ("/sys").
	Proc string
}

type cpuMark struct {
	comm string
	ns   int64
}

// Sensor gathers the machine's facts of one run.
type Sensor struct {
	opts Options
	fs   procfs.FS
	self int

	mu        sync.Mutex
	m         record.Machine
	stealAt   int64
	startCPU  map[int]cpuMark
	cgroups   map[string]*record.Cgroup // by "v1:/path"
	pidCgroup map[int32]string
	polls     int
	errs      []string
}

// New opens procfs; nothing is read until Begin.
func New(opts Options) (*Sensor, error) {
	if opts.Proc == "" {
		opts.Proc = procfs.DefaultMountPoint
	}
	fs, err := procfs.NewFS(opts.Proc)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", opts.Proc, err)
	}
	return &Sensor{opts: opts, fs: fs, self: os.Getpid(), cgroups: map[string]*record.Cgroup{},
		pidCgroup: map[int32]string{}}, nil
}

// Begin reads memory, steal time and every process's CPU time as the
// command is released.
//
// The reading is done in the background, the mutex held until it ends
// (Poll and Finish wait for it): the scan of every process's stat took
// 3–5 ms, all of them between the sensors' start and the command's
// release.
func (s *Sensor) Begin(uint64) {
	s.mu.Lock()
	go func() {
		defer s.mu.Unlock()
		s.m.MemStart = s.meminfo()
		s.stealAt = s.steal()
		s.startCPU = s.processCPU()
	}()
}

// Poll notes the memory cgroups of the run's live processes: new ones at
// every poll, all of them again now and then.
func (s *Sensor) Poll(uint64, *record.Sample) error {
	if s.opts.LivePIDs == nil {
		return nil
	}
	pids, err := s.opts.LivePIDs()
	if err != nil {
		return fmt.Errorf("machine: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	rescan := s.polls%cgroupRescan == 1
	for _, pid := range pids {
		if _, seen := s.pidCgroup[int32(pid)]; seen && !rescan {
			continue
		}
		s.noteCgroup(int32(pid))
	}
	return nil
}

// noteCgroup files pid under its memory cgroup. Called with s.mu held.
func (s *Sensor) noteCgroup(pid int32) {
	b, err := os.ReadFile(path.Join(s.opts.Proc, strconv.Itoa(int(pid)), "cgroup"))
	if err != nil {
		return // exited
	}
	version, p := MemoryCgroup(string(b))
	if version == 0 {
		return
	}
	key := fmt.Sprintf("v%d:%s", version, p)
	if old, ok := s.pidCgroup[pid]; ok && old == key {
		return
	}
	s.pidCgroup[pid] = key
	cg := s.cgroups[key]
	if cg == nil {
		cg = &record.Cgroup{Version: version, Path: p}
		cg.LimitBytes, cg.HighBytes = limits(version, p)
		s.cgroups[key] = cg
	}
	cg.PIDs = append(cg.PIDs, pid)
}

// Finish reads memory and steal time again, the CPU time other processes
// used during the run, and writes rec.Machine.
func (s *Sensor) Finish(rec *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.measure(&s.m, true)
	m := s.m
	rec.Machine = &m
	if len(s.errs) > 0 {
		return fmt.Errorf("machine: %s", strings.Join(s.errs, "; "))
	}
	return nil
}

// measure writes into m what changed since Begin: memory and steal time
// now, the cgroups seen, and with others the CPU time other processes
// used since (a scan of every process). Called with s.mu held.
func (s *Sensor) measure(m *record.Machine, others bool) {
	m.MemEnd = s.meminfo()
	if end := s.steal(); end > s.stealAt && s.stealAt >= 0 {
		m.StealNS = end - s.stealAt
	}
	if others {
		s.others(m, s.processCPU())
	}
	keys := make([]string, 0, len(s.cgroups))
	for k := range s.cgroups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cg := *s.cgroups[k]
		// Later polls append to the sensor's own.
		cg.PIDs = slices.Clone(cg.PIDs)
		m.Cgroups = append(m.Cgroups, cg)
	}
}

// Close is part of the sensor interface: nothing to release.
func (s *Sensor) Close() error { return nil }

func (s *Sensor) meminfo() record.MemInfo {
	mi, err := s.fs.Meminfo()
	if err != nil {
		s.errs = append(s.errs, fmt.Sprintf("read meminfo: %v", err))
		return record.MemInfo{}
	}
	kb := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p << 10
	}
	return record.MemInfo{TotalBytes: kb(mi.MemTotal), AvailableBytes: kb(mi.MemAvailable), CachedBytes: kb(mi.Cached)}
}

// steal is the machine's steal time in ns, -1 when unreadable.
func (s *Sensor) steal() int64 {
	st, err := s.fs.Stat()
	if err != nil {
		s.errs = append(s.errs, fmt.Sprintf("read stat: %v", err))
		return -1
	}
	return int64(st.CPUTotal.Steal * 1e9)
}

// processCPU is every process's CPU time (user + system) by pid.
func (s *Sensor) processCPU() map[int]cpuMark {
	procs, err := s.fs.AllProcs()
	if err != nil {
		s.errs = append(s.errs, fmt.Sprintf("list processes: %v", err))
		return nil
	}
	out := make(map[int]cpuMark, len(procs))
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // exited meanwhile
		}
		out[p.PID] = cpuMark{comm: st.Comm, ns: int64(st.CPUTime() * 1e9)}
	}
	return out
}

// others files the CPU time processes outside the run used between the
// start and end readings: the difference for those alive at both, the
// whole for those that started during the run. Processes that started
// and ended in between are not seen.
func (s *Sensor) others(m *record.Machine, end map[int]cpuMark) {
	type agg struct {
		n  int
		ns int64
	}
	byComm := map[string]*agg{}
	for pid, e := range end {
		if pid == s.self || (s.opts.Traced != nil && s.opts.Traced(int32(pid))) {
			continue
		}
		d := e.ns
		if b, ok := s.startCPU[pid]; ok {
			d -= b.ns
		}
		if d <= 0 {
			continue
		}
		a := byComm[e.comm]
		if a == nil {
			a = &agg{}
			byComm[e.comm] = a
		}
		a.n++
		a.ns += d
		m.OthersCPUNS += d
		m.OthersCount++
	}
	for comm, a := range byComm {
		m.Others = append(m.Others, record.OtherCPU{Comm: comm, Processes: a.n, CPUNS: a.ns})
	}
	sort.Slice(m.Others, func(i, j int) bool {
		x, y := m.Others[i], m.Others[j]
		return x.CPUNS > y.CPUNS || x.CPUNS == y.CPUNS && x.Comm < y.Comm
	})
	if len(m.Others) > TopOthers {
		m.Others = m.Others[:TopOthers]
	}
}
