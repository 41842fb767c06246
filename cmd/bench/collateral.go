package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
)

// The collateral row: what processes coldtrace does not trace pay while
// it runs. Untraced loops pinned to one CPU run beside a situation
// (coldtrace tracing a command, attached to a process, or empty BPF
// programs on the same tracepoints: the floor) and alone, in interleaved
// pairs; each pair's ratio is the loop's time per operation beside the
// situation over its time alone.

// loopDef is one untraced loop.
type loopDef struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Budget is the highest upper end of the ratio's interval; 0: the
	// floor's median plus floorSlack.
	Budget float64 `json:"budget,omitempty"`
	argv   []string
}

// floorSlack is how far above the floor's median the cached pread may go.
const floorSlack = 0.03

// situation is what runs beside the loops.
type situation struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// PathSyscalls: the path-syscall probes are attached, which slow every
	// system call of the machine: reported apart, getppid's budget not
	// applied.
	PathSyscalls bool `json:"path_syscalls,omitempty"`
	start        func(c *collateral) (*beside, error)
}

// cell is one loop beside one situation.
type cell struct {
	Loop   string    `json:"loop"`
	Ratios []float64 `json:"ratios"`
	// Dropped are the pairs left out: a run whose system time was over
	// twice the least of its kind in the cell (the VM's slow mode).
	Dropped     int     `json:"dropped"`
	Median      float64 `json:"ratio_median"`
	Lo          float64 `json:"ratio_p05"`
	Hi          float64 `json:"ratio_p95"`
	OffNSPerOp  float64 `json:"off_ns_per_op"`
	OnNSPerOp   float64 `json:"on_ns_per_op"`
	OthersCPU   float64 `json:"others_cpu"` // share of all CPUs other processes used during the loops beside the situation
	BudgetLabel string  `json:"budget,omitempty"`
	Miss        string  `json:"miss,omitempty"`
}

type situationResult struct {
	situation
	Cells    []*cell    `json:"cells"`
	Programs []progStat `json:"bpf_programs,omitempty"`
}

// collateralResult is the row's part of -json.
type collateralResult struct {
	Pairs      int                `json:"pairs"`
	CPU        int                `json:"cpu"`
	Loops      []loopDef          `json:"loops"`
	Situations []*situationResult `json:"situations"`
	Misses     []string           `json:"misses,omitempty"`
}

// collateral runs the row.
type collateral struct {
	o     options
	dir   string
	cpu   int
	loops []loopDef
	env   []string
	seq   int
}

// loopRun is one run of a loop.
type loopRun struct {
	nsPerOp float64
	stimeNS int64
	others  float64
}

func wantCollateral(o options) bool {
	return o.collateralPairs > 0 && (len(o.only) == 0 || slices.Contains(o.only, "collateral"))
}

// collateralLoops builds the loops' helper and data in dir.
func collateralLoops(o options, dir, src string, cpu int) ([]loopDef, error) {
	bin := filepath.Join(dir, "collateral")
	cc := exec.Command("cc", "-O2", "-Wall", "-pthread", "-o", bin, filepath.Join(src, "collateral.c"))
	if out, err := cc.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the collateral loops (cc %s/collateral.c): %v\n%s", src, err, out)
	}
	one := filepath.Join(dir, "one-byte")
	if err := os.WriteFile(one, []byte("x"), 0o644); err != nil {
		return nil, err
	}
	n := map[string]int{"getppid": 2000000, "pread": 1000000, "pingpong": 100000, "files": 20000, "gai": 20000}
	if o.smoke {
		for k := range n {
			n[k] /= 40
		}
	}
	files := filepath.Join(dir, "collateral-files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return nil, err
	}
	for i := 0; i < n["files"]; i++ {
		if err := os.WriteFile(filepath.Join(files, fmt.Sprintf("f%05d", i)), bytes.Repeat([]byte("y"), 100), 0o644); err != nil {
			return nil, err
		}
	}
	c, num := strconv.Itoa(cpu), func(k string) string { return strconv.Itoa(n[k]) }
	return []loopDef{
		{Name: "getppid", Title: "getppid", Budget: 1.02, argv: []string{bin, c, "getppid", num("getppid")}},
		{Name: "pread", Title: "cached 1-byte pread", argv: []string{bin, c, "pread", num("pread"), one}},
		{Name: "pingpong", Title: "pipe ping-pong", Budget: 1.05, argv: []string{bin, c, "pingpong", num("pingpong")}},
		{Name: "pyfiles", Title: fmt.Sprintf("Python %d small files", n["files"]), Budget: 1.03,
			argv: []string{python, filepath.Join(src, "collateral.py"), c, files, num("files")}},
		{Name: "gai", Title: "getaddrinfo(localhost)", Budget: 1.02, argv: []string{bin, c, "gai", num("gai")}},
	}, nil
}

// runCollateral runs the row.
func runCollateral(o options, dir, src string, log func(string, ...any)) (*collateralResult, error) {
	cpu := runtime.NumCPU() - 1
	loops, err := collateralLoops(o, dir, src, cpu)
	if err != nil {
		return nil, err
	}
	c := &collateral{o: o, dir: dir, cpu: cpu, loops: loops, env: newRunner(o, "", dir).env}
	res := &collateralResult{Pairs: o.collateralPairs, CPU: cpu, Loops: loops}
	// One untimed run of each: the files and Python's modules cached.
	for j := range loops {
		if _, err := c.runLoop(&loops[j]); err != nil {
			return nil, err
		}
	}
	sits := situations(o.smoke)
	var floor *situationResult
	for _, s := range sits {
		log("collateral: beside %s (%d pairs)", s.Title, o.collateralPairs)
		sr, err := c.measure(s)
		if err != nil {
			return nil, fmt.Errorf("collateral beside %s: %w", s.Name, err)
		}
		if s.Name == "floor" {
			floor = sr
		}
		if o.bpfStats != "off" || !o.smoke {
			if sr.Programs, err = c.statsPass(s); err != nil {
				log("collateral: BPF statistics beside %s: %v", s.Name, err)
			}
		}
		res.Situations = append(res.Situations, sr)
	}
	if !o.smoke {
		for _, sr := range res.Situations {
			res.Misses = append(res.Misses, checkCollateral(sr, floor)...)
		}
	}
	return res, nil
}

// measure runs the pairs of one situation.
func (c *collateral) measure(s situation) (*situationResult, error) {
	off := make([][]loopRun, len(c.loops))
	on := make([][]loopRun, len(c.loops))
	for i := 0; i < c.o.collateralPairs; i++ {
		// Alternate which half of the pair comes first: a drift of the
		// machine then cancels in the median.
		if i%2 == 0 {
			if err := c.loopsAlone(off); err != nil {
				return nil, err
			}
		}
		if err := c.loopsBeside(s, on); err != nil {
			return nil, err
		}
		if i%2 == 1 {
			if err := c.loopsAlone(off); err != nil {
				return nil, err
			}
		}
	}
	sr := &situationResult{situation: s}
	for j, l := range c.loops {
		sr.Cells = append(sr.Cells, pairCell(l.Name, off[j], on[j]))
	}
	return sr, nil
}

func (c *collateral) loopsAlone(into [][]loopRun) error {
	for j := range c.loops {
		r, err := c.runLoop(&c.loops[j])
		if err != nil {
			return err
		}
		into[j] = append(into[j], r)
	}
	return nil
}

func (c *collateral) loopsBeside(s situation, into [][]loopRun) error {
	b, err := s.start(c)
	if err != nil {
		return err
	}
	defer b.stop()
	return c.loopsAlone(into)
}

// runLoop runs one loop once.
func (c *collateral) runLoop(l *loopDef) (loopRun, error) {
	cmd := exec.Command(l.argv[0], l.argv[1:]...)
	cmd.Env = c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	s0, t0 := readCPUStat(), monoNS()
	if err := cmd.Run(); err != nil {
		return loopRun{}, fmt.Errorf("loop %s: %v: %s", l.Name, err, stderr.Bytes())
	}
	t1, s1 := monoNS(), readCPUStat()
	var out struct {
		ElapsedNS int64 `json:"elapsed_ns"`
		N         int64 `json:"n"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil || out.N == 0 {
		return loopRun{}, fmt.Errorf("loop %s: output %q: %v", l.Name, stdout.Bytes(), err)
	}
	r := loopRun{nsPerOp: float64(out.ElapsedNS) / float64(out.N)}
	var own int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.stimeNS = ru.Stime.Nano()
		own = ru.Utime.Nano() + ru.Stime.Nano()
	}
	r.others, _ = s1.foreign(s0, own, t1-t0)
	return r, nil
}

// pairCell compares the loop's runs beside a situation with its runs
// alone, pair by pair, leaving out pairs with a run in the slow mode.
func pairCell(name string, off, on []loopRun) *cell {
	c := &cell{Loop: name}
	offFloor, onFloor := leastStime(off), leastStime(on)
	var offNS, onNS, others []float64
	for i := range min(len(off), len(on)) {
		if off[i].stimeNS > 2*offFloor || on[i].stimeNS > 2*onFloor {
			c.Dropped++
			continue
		}
		c.Ratios = append(c.Ratios, on[i].nsPerOp/off[i].nsPerOp)
		offNS, onNS = append(offNS, off[i].nsPerOp), append(onNS, on[i].nsPerOp)
		others = append(others, on[i].others)
	}
	if len(c.Ratios) == 0 {
		return c
	}
	c.Median = median(c.Ratios)
	c.Lo, c.Hi = bootstrapMedian(c.Ratios, 2000, 0.90)
	c.OffNSPerOp, c.OnNSPerOp, c.OthersCPU = median(offNS), median(onNS), median(others)
	return c
}

func leastStime(rs []loopRun) int64 {
	least := int64(-1)
	for _, r := range rs {
		if least < 0 || r.stimeNS < least {
			least = r.stimeNS
		}
	}
	return max(least, 0)
}

// checkCollateral names the budgets a situation's cells miss: the upper
// end of each interval against the loop's budget, the pread against the
// floor. Situations with the path-syscall probes attached are reported,
// not judged on getppid.
func checkCollateral(sr *situationResult, floor *situationResult) []string {
	if sr.Name == "floor" {
		return nil
	}
	var misses []string
	for _, c := range sr.Cells {
		budget, label := 0.0, ""
		switch {
		case c.Loop == "pread" && floor != nil:
			fc := floor.cell(c.Loop)
			if fc == nil || len(fc.Ratios) == 0 {
				continue
			}
			budget, label = fc.Median+floorSlack, fmt.Sprintf("floor %.3f + %.2f", fc.Median, floorSlack)
		case c.Loop == "getppid" && sr.PathSyscalls:
			continue
		default:
			budget = loopBudget(c.Loop)
			label = fmt.Sprintf("%.2f", budget)
		}
		if budget == 0 {
			continue
		}
		c.BudgetLabel = label
		switch {
		case len(c.Ratios) == 0:
			c.Miss = "no pair left"
		case c.Hi > budget:
			c.Miss = fmt.Sprintf("upper end %.3f > %s", c.Hi, label)
		}
		if c.Miss != "" {
			misses = append(misses, fmt.Sprintf("collateral %s beside %s: %s", c.Loop, sr.Name, c.Miss))
		}
	}
	return misses
}

func loopBudget(name string) float64 {
	return map[string]float64{"getppid": 1.02, "pingpong": 1.05, "pyfiles": 1.03, "gai": 1.02}[name]
}

func (sr *situationResult) cell(loop string) *cell {
	for _, c := range sr.Cells {
		if c.Loop == loop {
			return c
		}
	}
	return nil
}

// print writes the row's table.
func (r *collateralResult) print(w io.Writer) {
	fmt.Fprintf(w, "\nWhat untraced processes pay (loops pinned to CPU %d; %d pairs; beside/alone ratio: median [90%% bootstrap interval])\n", r.CPU, r.Pairs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "beside\tloop\talone ns/op\tbeside ns/op\tratio\tinterval\tdropped\tothers' CPU\tbudget\t")
	for _, withPath := range []bool{false, true} {
		for _, sr := range r.Situations {
			if sr.PathSyscalls != withPath {
				continue
			}
			if withPath {
				// Reported apart: attached syscall tracepoints slow every
				// system call of the machine, on all through the loops.
				fmt.Fprintf(tw, "(path-syscall probes on)\t\t\t\t\t\t\t\t\t\n")
			}
			for _, c := range sr.Cells {
				verdict := c.BudgetLabel
				if c.Miss != "" {
					verdict = "MISS " + c.Miss
				}
				fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.3f\t%.3f–%.3f\t%d\t%.0f%%\t%s\t\n",
					sr.Name, c.Loop, c.OffNSPerOp, c.OnNSPerOp, c.Median, c.Lo, c.Hi, c.Dropped, 100*c.OthersCPU, verdict)
			}
		}
	}
	tw.Flush()
	for _, sr := range r.Situations {
		if len(sr.Programs) == 0 {
			continue
		}
		fmt.Fprintf(w, "  BPF programs beside %s (one pass of the loops, bpf_stats):", sr.Name)
		var parts []string
		for _, p := range sr.Programs {
			if p.Runs > 0 {
				parts = append(parts, fmt.Sprintf(" %s %d×%.0f ns", p.Name, p.Runs, p.NSPerRun))
			}
		}
		fmt.Fprintln(w, strings.Join(parts, ","))
	}
}
