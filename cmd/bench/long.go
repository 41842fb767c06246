package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
)

// Bounds per hour of a long traced run.
const (
	longRSSGrowthPerHour = 8 << 20
	longRecordPerHour    = 50 << 20
	longCPUShare         = 0.01 // of one core
)

// longResult is what -long measures of one traced long run.
type longResult struct {
	Duration time.Duration `json:"duration_ns"`
	WallNS   int64         `json:"wall_ns"`
	CPUNS    int64         `json:"coldtrace_cpu_ns"`
	CPUShare float64       `json:"coldtrace_cpu_share"` // of one core, over the run
	// SteadyShare is the share of one core from the steady point (one
	// minute in, or a sixth of a shorter run) to the end: what an hour
	// costs, without the load at the start and the record at the end.
	SteadyShare float64 `json:"coldtrace_steady_cpu_share"`
	RSSAtMinute uint64  `json:"rss_at_1m_bytes"`
	RSSAtEnd    uint64  `json:"rss_at_end_bytes"` // the last second of the command

	// RSSHourGrowth is the growth from the first minute projected to an
	// hour: the growth so far, plus the late slope (peak RSS of the last
	// half of the steady part against the first half's) for the rest of
	// the hour. Bounded memory levels off; a leak keeps its slope.
	RSSHourGrowth int64    `json:"rss_growth_projected_1h_bytes"`
	MaxRSS        uint64   `json:"max_rss_bytes"`
	RecordBytes   int64    `json:"record_bytes"`
	Lost          uint64   `json:"lost_events"`
	EventsSeen    uint64   `json:"events_seen"`
	Samples       int      `json:"timeline_samples"`
	Polls         int      `json:"polls"` // the samples sum this many polls (a long timeline is coarsened)
	Invariants    []string `json:"invariant_violations,omitempty"`
	Compilations  int      `json:"compiler_runs"`
	Misses        []string `json:"misses,omitempty"`
}

// benchLong runs the long workload once, traced: 32 Python threads
// reading and re-reading small files, a compiler subprocess every 3 s.
// It samples coldtrace's RSS each second and judges the run against the
// per-hour bounds, scaled to its length.
func benchLong(o options, stdout, stderr io.Writer) (*longResult, error) {
	src := o.src
	if src == "" {
		var err error
		if src, err = findSrc(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(o.dir, "coldtrace-long-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-pthread", "-o", work, filepath.Join(src, "work.c")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the workload helper: %v\n%s", err, out)
	}
	tree := filepath.Join(dir, "tree")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.Command(work, "0", "mkfiles", tree, "4000").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("create files: %v: %s", err, out)
	}
	recPath, jsonPath := filepath.Join(dir, "long.rec"), filepath.Join(dir, "long.json")
	argv := append([]string{o.coldtrace, "-q", "--json", jsonPath, "-o", recPath}, o.ctArgs...)
	argv = append(argv, "--", python, filepath.Join(src, "work.py"), "0", "pylong",
		strconv.FormatFloat(o.long.Seconds(), 'f', 0, 64), tree)
	fmt.Fprintf(stdout, "bench: long run, %v: %s\n", o.long, strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	res := &longResult{Duration: o.long}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var werr error
	steadyAt := min(time.Minute, o.long/6)
	var cpu0, cpu1 int64
	var t0s, t1s time.Time
	var steady []rssAt
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case <-tick.C:
			if c, ok := procCPU(cmd.Process.Pid); ok {
				if time.Since(t0) <= steadyAt || t0s.IsZero() {
					cpu0, t0s = c, time.Now()
				}
				cpu1, t1s = c, time.Now()
			}
			rss, ok := vmRSS(cmd.Process.Pid)
			if !ok {
				continue
			}
			el := time.Since(t0)
			if el <= time.Minute+time.Second {
				res.RSSAtMinute = rss
			}
			// The end is the command's: what coldtrace holds while it
			// writes the record afterwards is in the peak.
			if el <= o.long {
				res.RSSAtEnd = rss
			}
			if el >= steadyAt && el <= o.long {
				steady = append(steady, rssAt{el, rss})
			}
		}
	}
	if werr != nil {
		return nil, fmt.Errorf("long run: %w", werr)
	}
	if d := t1s.Sub(t0s); d > 0 {
		res.SteadyShare = float64(time.Duration(cpu1-cpu0)) / float64(d)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, fmt.Errorf("long run wrote no JSON summary: %w", err)
	}
	var s ctSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	res.RSSHourGrowth = hourGrowth(int64(res.RSSAtEnd)-int64(res.RSSAtMinute), steady, o.long)
	res.WallNS, res.CPUNS, res.MaxRSS = s.WallNS, s.Self.CPUNS, s.Self.MaxRSSBytes
	res.Lost, res.EventsSeen = s.LostEvents, s.Self.EventsSeen
	if s.WallNS > 0 {
		res.CPUShare = float64(s.Self.CPUNS) / float64(s.WallNS)
	}
	st, err := os.Stat(recPath)
	if err != nil {
		return nil, fmt.Errorf("long run wrote no record: %w", err)
	}
	res.RecordBytes = st.Size()
	rec, err := record.ReadFile(recPath)
	if err != nil {
		return nil, err
	}
	res.Samples, res.Polls = len(rec.Samples), len(rec.Samples)
	if rec.Coarsened != nil {
		res.Polls = rec.Coarsened.Polls
	}
	for _, v := range invariants.Check(rec) {
		res.Invariants = append(res.Invariants, fmt.Sprint(v))
	}
	if rec.JIT != nil {
		for _, c := range rec.JIT.Compilers {
			res.Compilations += int(c.Runs)
		}
	}
	res.judge()
	return res, nil
}

type rssAt struct {
	at  time.Duration
	rss uint64
}

// hourGrowth projects the RSS growth seen over a run of d to an hour: the
// growth so far plus, for the rest of the hour, the slope between the
// peaks of the steady part's two halves (peaks, not samples: the garbage
// collector's sawtooth is several MiB).
func hourGrowth(grown int64, steady []rssAt, d time.Duration) int64 {
	if d >= time.Hour || len(steady) < 4 {
		return grown
	}
	mid := len(steady) / 2
	peak := func(xs []rssAt) (rssAt, bool) {
		var best rssAt
		for _, x := range xs {
			if x.rss >= best.rss {
				best = x
			}
		}
		return best, best.rss > 0
	}
	a, okA := peak(steady[:mid])
	b, okB := peak(steady[mid:])
	span := steady[len(steady)-1].at - steady[0].at
	if !okA || !okB || span <= 0 {
		return grown
	}
	// The halves' peaks are half the steady span apart on average.
	slope := float64(int64(b.rss)-int64(a.rss)) / (span.Hours() / 2)
	return max(grown, 0) + int64(max(slope, 0)*(time.Hour-d).Hours())
}

// judge names each bound the run missed, scaled from per hour to its
// wall time. The RSS growth is from the first minute to the end.
func (r *longResult) judge() {
	hours := float64(r.WallNS) / float64(time.Hour)
	if r.RSSHourGrowth > longRSSGrowthPerHour {
		r.Misses = append(r.Misses, fmt.Sprintf("RSS grew %.1f MiB in %.2f h, %.1f MiB projected to an hour, over %d MiB",
			float64(int64(r.RSSAtEnd)-int64(r.RSSAtMinute))/(1<<20), hours, float64(r.RSSHourGrowth)/(1<<20), longRSSGrowthPerHour>>20))
	}
	if float64(r.RecordBytes) > longRecordPerHour*hours {
		r.Misses = append(r.Misses, fmt.Sprintf("record %.1f MiB, over %.1f MiB for %.2f h", mib(uint64(r.RecordBytes)), longRecordPerHour*hours/(1<<20), hours))
	}
	if r.SteadyShare >= longCPUShare {
		r.Misses = append(r.Misses, fmt.Sprintf("coldtrace used %.2f%% of a core in the steady part (%.2f%% over the whole run), bound %.0f%%", 100*r.SteadyShare, 100*r.CPUShare, 100*longCPUShare))
	}
	if r.Lost > 0 {
		r.Misses = append(r.Misses, fmt.Sprintf("%d events lost", r.Lost))
	}
	if len(r.Invariants) > 0 {
		r.Misses = append(r.Misses, fmt.Sprintf("the record breaks %d attribution invariants", len(r.Invariants)))
	}
}

func (r *longResult) print(w io.Writer) {
	fmt.Fprintf(w, "long run %v (wall %.1f s): coldtrace CPU %.2f%% of a core steady, %.2f%% over the run (%.2f s), RSS %.1f MiB at 1 min, %.1f MiB at the end (%.1f MiB growth projected to 1 h; peak %.1f MiB), record %.2f MiB (%d timeline samples of %d polls), %d events seen, %d lost, %d compiler runs, invariants %s\n",
		r.Duration, float64(r.WallNS)/1e9, 100*r.SteadyShare, 100*r.CPUShare, float64(r.CPUNS)/1e9, mib(r.RSSAtMinute), mib(r.RSSAtEnd), float64(r.RSSHourGrowth)/(1<<20), mib(r.MaxRSS),
		mib(uint64(r.RecordBytes)), r.Samples, r.Polls, r.EventsSeen, r.Lost, r.Compilations, map[bool]string{true: "hold", false: strings.Join(r.Invariants, "; ")}[len(r.Invariants) == 0])
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// procCPU is a process's user and system time from /proc/PID/stat.
func procCPU(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces: the fields follow its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (ut + st) * int64(time.Second/100), true // USER_HZ
}

// vmRSS is a process's resident set from /proc/PID/status.
func vmRSS(pid int) (uint64, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
