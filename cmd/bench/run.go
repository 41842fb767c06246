package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runResult is one run of one workload.
type runResult struct {
	Kind  string `json:"kind"` // "U" untraced, "T" traced, "F" untraced beside the floor's empty programs, "W" warm-up, "S" BPF-stats pass
	Index int    `json:"index"`
	// WallNS is the workload's own elapsed time (the compared quantity).
	WallNS int64 `json:"wall_ns"`
	// LaunchNS is harness spawn → workload main(): for a traced run it
	// holds coldtrace's whole startup as seen from outside.
	LaunchNS int64 `json:"launch_ns"`
	// OuterNS is harness spawn → process reaped.
	OuterNS  int64   `json:"outer_ns"`
	Late     bool    `json:"late,omitempty"` // the workload started after its start time: the delay was not met
	Check    uint64  `json:"check"`
	Switches uint64  `json:"switches"`
	PhasesNS []int64 `json:"phases_ns,omitempty"` // groundtruth: sleep, read, spin
	// WorkCPUNS is the workload's own CPU time from start to end, as it
	// reports it (BPF programs that run in its context included).
	WorkCPUNS int64 `json:"work_cpu_ns"`
	// CPUNS is the CPU time of the spawned process tree (coldtrace and the
	// workload for a traced run).
	CPUNS int64 `json:"cpu_ns"`
	// BgCPU is the share of all CPUs that other processes used during the
	// run; Steal the share the hypervisor took.
	BgCPU           float64      `json:"bg_cpu"`
	Steal           float64      `json:"steal"`
	ResidentAtStart float64      `json:"resident_at_start"`
	Trace           *traceResult `json:"trace,omitempty"`
}

// traceResult is what coldtrace's JSON summary says about a traced run.
type traceResult struct {
	ExitCode    int    `json:"exit_code"`
	WallNS      int64  `json:"wall_ns"`
	StartupNS   int64  `json:"startup_ns"`
	LostEvents  uint64 `json:"lost_events"`
	CPUNS       int64  `json:"cpu_ns"`
	MaxRSSBytes uint64 `json:"max_rss_bytes"`
	EventsSeen  uint64 `json:"events_seen"`
	// Python stacks: walks and stacks reused without one.
	PyWalks    uint64   `json:"python_walks"`
	PyReuses   uint64   `json:"python_reuses"`
	Processes  int      `json:"processes"`
	Files      int      `json:"files"`
	FileMissed uint64   `json:"file_pages_missed"` // of the workload's data file (or the files under its directory)
	Warnings   []string `json:"warnings,omitempty"`
}

type ctSummary struct {
	ExitCode   int    `json:"exit_code"`
	WallNS     int64  `json:"wall_ns"`
	StartupNS  int64  `json:"startup_ns"`
	LostEvents uint64 `json:"lost_events"`
	Self       struct {
		CPUNS       int64  `json:"cpu_ns"`
		MaxRSSBytes uint64 `json:"max_rss_bytes"`
		EventsSeen  uint64 `json:"events_seen"`
		PyWalks     uint64 `json:"python_walks"`
		PyReuses    uint64 `json:"python_reuses"`
	} `json:"coldtrace"`
	Files []struct {
		Path        string `json:"path"`
		PagesMissed uint64 `json:"pages_missed"`
	} `json:"files"`
	Processes []json.RawMessage `json:"processes"`
	Warnings  []string          `json:"warnings"`
}

// runner runs workloads; one per bench.
type runner struct {
	o    options
	work string
	dir  string
	env  []string
	seq  int
	// cpuFloor is the least CPU time a cold workload's run has taken so
	// far, by workload name (see runRetry).
	cpuFloor map[string]int64
	// floor is the empty programs F runs attach (-floor), loaded once.
	floor *floorSet
}

func newRunner(o options, work, dir string) *runner {
	// The command runs as root both ways: coldtrace would otherwise switch
	// to the sudo user, and the untraced run would not.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUDO_") {
			env = append(env, kv)
		}
	}
	return &runner{o: o, work: work, dir: dir, env: env, cpuFloor: map[string]int64{}}
}

func monoNS() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// runOnce waits, prepares the page cache, and runs w once.
func (r *runner) runOnce(w *workload, kind string, index int, stats *progCapture) (runResult, error) {
	res := runResult{Kind: kind, Index: index}
	traced := kind == "T" || kind == "S"
	if w.Cold {
		time.Sleep(r.o.settle)
	} else {
		time.Sleep(r.o.settleWarm)
	}
	var err error
	if res.ResidentAtStart, err = prepare(w); err != nil {
		return res, err
	}
	if w.Cold {
		// On a VM that hands free memory back to the host, the first touch
		// of a page that went back costs microseconds of guest CPU; a cold
		// read of the same file took 410 or 900 ms by how much of the free
		// memory the host had taken. The helper writes to as much memory
		// as the file is big, and exits, so the read gets touched pages.
		// (A child, not this process: a peak RSS here would be inherited
		// by coldtrace's ru_maxrss through fork.)
		st, err := os.Stat(w.File)
		if err != nil {
			return res, err
		}
		touch := exec.Command(r.work, "0", "touch", strconv.FormatInt(st.Size(), 10))
		if out, err := touch.CombinedOutput(); err != nil {
			return res, fmt.Errorf("touch memory before %s: %v: %s", w.Name, err, out)
		}
	}
	if w.WarmFirst {
		prog := w.program(r.work)
		warm := exec.Command(prog[0], append(append(prog[1:], "0"), w.Args...)...)
		if out, err := warm.CombinedOutput(); err != nil {
			return res, fmt.Errorf("warm %s: %v: %s", w.Name, err, out)
		}
	}
	startAt := monoNS() + r.o.delay.Nanoseconds()
	argv := append(append(w.program(r.work), strconv.FormatInt(startAt, 10)), w.Args...)
	var jsonPath string
	if traced {
		r.seq++
		jsonPath = filepath.Join(r.dir, fmt.Sprintf("coldtrace-%s-%d.json", w.Name, r.seq))
		ct := append([]string{r.o.coldtrace, "-q", "--json", jsonPath}, r.o.ctArgs...)
		argv = append(append(ct, "--"), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = r.env
	if kind == "S" && r.o.profDir != "" {
		cmd.Env = append(append([]string(nil), r.env...), "COLDTRACE_CPUPROFILE="+filepath.Join(r.o.profDir, "coldtrace-"+w.Name+".pprof"))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	if kind == "F" {
		// Attached inside the delay, before the workload's start time, and
		// taken off after it ends.
		links, err := r.floor.attach()
		if err != nil {
			return res, err
		}
		defer closeAll(links)
	}
	s0 := readCPUStat()
	t0 := monoNS()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start %s: %w", argv[0], err)
	}
	if stats != nil {
		stats.watch(cmd.Process.Pid, startAt)
	}
	werr := cmd.Wait()
	t1 := monoNS()
	s1 := readCPUStat()
	if stats != nil {
		stats.stop()
	}
	if werr != nil {
		return res, fmt.Errorf("%s: %v\nstderr: %s", strings.Join(argv, " "), werr, stderr.Bytes())
	}
	out, err := parseWork(stdout.Bytes())
	if err != nil {
		return res, fmt.Errorf("%s: %w\nstderr: %s", strings.Join(argv, " "), err, stderr.Bytes())
	}
	res.WallNS = out.ElapsedNS
	res.LaunchNS = out.EntryNS - t0
	res.OuterNS = t1 - t0
	res.Late = out.Late
	res.Check = out.Check
	res.Switches = out.Switches
	res.WorkCPUNS = out.CPUNS
	res.PhasesNS = out.PhasesNS
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.CPUNS = ru.Utime.Nano() + ru.Stime.Nano()
	}
	res.BgCPU, res.Steal = s1.foreign(s0, res.CPUNS, res.OuterNS)

	if traced {
		tr, err := readTrace(jsonPath, w.File)
		if err != nil {
			return res, err
		}
		if tr.ExitCode != 0 {
			return res, fmt.Errorf("traced %s: command exit code %d\nstderr: %s", w.Name, tr.ExitCode, stderr.Bytes())
		}
		res.Trace = tr
	}
	return res, nil
}

func readTrace(path, dataFile string) (*traceResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("coldtrace wrote no JSON summary: %w", err)
	}
	var s ctSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("coldtrace's JSON summary %s: %w", path, err)
	}
	tr := &traceResult{ExitCode: s.ExitCode, WallNS: s.WallNS, StartupNS: s.StartupNS, LostEvents: s.LostEvents,
		CPUNS: s.Self.CPUNS, MaxRSSBytes: s.Self.MaxRSSBytes, EventsSeen: s.Self.EventsSeen, PyWalks: s.Self.PyWalks, PyReuses: s.Self.PyReuses,
		Processes: len(s.Processes), Files: len(s.Files), Warnings: s.Warnings}
	for _, f := range s.Files {
		// A directory's (an evicted package's) are its files' together.
		if dataFile != "" && (f.Path == dataFile || strings.HasPrefix(f.Path, dataFile+"/")) {
			tr.FileMissed += f.PagesMissed
		}
	}
	return tr, nil
}

// cpuStat is the first line of /proc/stat, in clock ticks.
type cpuStat struct {
	busy, steal, total uint64
	ok                 bool
}

func readCPUStat() cpuStat {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuStat{}
	}
	var v [8]uint64
	for i := range v {
		v[i], _ = strconv.ParseUint(f[i+1], 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	s := cpuStat{busy: v[0] + v[1] + v[2] + v[5] + v[6], steal: v[7], ok: true}
	for _, x := range v {
		s.total += x
	}
	return s
}

// foreign is the share of all CPUs busy with other work than ours (own,
// in ns) over wallNS, and the share stolen by the hypervisor. /proc/stat
// counts in ticks of 10 ms: the figure is coarse on short runs.
func (s cpuStat) foreign(before cpuStat, own, wallNS int64) (bg, steal float64) {
	if !s.ok || !before.ok || wallNS <= 0 {
		return 0, 0
	}
	tick := float64(time.Second) / 100 // USER_HZ
	capacity := float64(wallNS) * float64(runtime.NumCPU())
	busy := float64(s.busy-before.busy) * tick
	bg = max(0, (busy-float64(own))/capacity)
	steal = float64(s.steal-before.steal) * tick / capacity
	return bg, steal
}
