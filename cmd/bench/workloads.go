package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Budgets coldtrace is held to: the traced start-up's extra time and
// resident memory, and the switch rate the ping-pong must reach.
const (
	startupBudget = 100 * time.Millisecond
	rssBudget     = 64 << 20
	minSwitchRate = 200e3 // context switches per second the ping-pong must reach
)

// workload is one command the bench runs traced and untraced.
type workload struct {
	Name   string  `json:"name"`
	Title  string  `json:"title"`
	Budget float64 `json:"ratio_budget"` // highest median traced/untraced ratio
	NoLoss bool    `json:"no_loss"`      // lost events must be zero
	// File is the data file whose page-cache state is set before each run:
	// evicted when Cold, else made fully resident.
	File string `json:"file,omitempty"`
	Cold bool   `json:"cold"`
	// Args follow the start time on work's command line.
	Args []string `json:"args"`
	// WarmFirst runs the workload once, untimed, before every measured
	// run, to bring its files into the page cache: DAMON pages idle files
	// out between runs, which made some "warm" runs partly cold (±20% run
	// to run).
	WarmFirst bool `json:"warm_first,omitempty"`
	// Prog, when set, runs the workload instead of the C helper: an
	// interpreter and its script (the Python workloads).
	Prog []string `json:"prog,omitempty"`
	// MinRate, when set, is the switches per second the untraced runs must
	// reach for the workload to be what it claims.
	MinRate float64 `json:"min_switch_rate,omitempty"`
}

var workloadNames = append([]string{"seqread", "mmap", "smallfiles", "forkexec", "ctxswitch", "groundtruth",
	"pysmallfiles", "pyimport", "pyread", "pyread64k", "pymmapcold", "pycoldimport"}, networkWorkloadNames...)

// python is the interpreter of the Python workloads: the system's, as a
// user would run it.
const python = "/usr/bin/python3"

// program is the command line in front of the start time.
func (w *workload) program(work string) []string {
	if len(w.Prog) > 0 {
		return append([]string(nil), w.Prog...)
	}
	return []string{work}
}

func validWorkload(name string) bool {
	for _, n := range workloadNames {
		if n == name {
			return true
		}
	}
	return false
}

// sizes are the knobs that -smoke turns down.
type sizes struct {
	bigFile    int64 // workloads 1 and 2
	gtFile     int64 // workload 6
	smallFiles int
	processes  int
	rounds     int // ping-pong round trips, two switches each
	mmapRounds int // times the mmap workload faults the whole file in
	gtSleep    time.Duration
	gtSpin     time.Duration
	// pyModules caps pyimport's list (0: every importable module);
	// coldModules is the size of the evicted package pycoldimport
	// imports. Smoke sizes: importing 1,800 modules four times was 12 s
	// of the smoke run's 48.
	pyModules   int
	coldModules int
}

func sizesFor(smoke bool) sizes {
	if smoke {
		return sizes{bigFile: 64 << 20, gtFile: 32 << 20, smallFiles: 2000, processes: 200, rounds: 20000, mmapRounds: 2,
			gtSleep: 100 * time.Millisecond, gtSpin: 100 * time.Millisecond, pyModules: 200, coldModules: 500}
	}
	return sizes{bigFile: 1 << 30, gtFile: 512 << 20, smallFiles: 20000, processes: 2000, rounds: 300000, mmapRounds: 16,
		gtSleep: time.Second, gtSpin: time.Second, coldModules: 2000}
}

// setup builds the helper and the data files in dir and returns the
// workloads in workloadNames' order.
func setup(o options, dir, src string, log func(string, ...any)) (work string, ws []*workload, err error) {
	sz := sizesFor(o.smoke)
	want := func(name string) bool {
		if len(o.only) == 0 {
			return true
		}
		for _, n := range o.only {
			if n == name {
				return true
			}
		}
		return false
	}

	work = filepath.Join(dir, "work")
	cc := exec.Command("cc", "-O2", "-Wall", "-pthread", "-o", work, filepath.Join(src, "work.c"))
	if out, err := cc.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("build the workload helper (cc %s/work.c): %v\n%s", src, err, out)
	}

	big := filepath.Join(dir, "big.dat")
	if want("seqread") || want("mmap") {
		log("writing %s (%d MiB)", big, sz.bigFile>>20)
		if err := writeDataFile(big, sz.bigFile, 1); err != nil {
			return "", nil, err
		}
	}
	if want("seqread") {
		ws = append(ws, &workload{Name: "seqread", Title: fmt.Sprintf("cold sequential read %s", human(sz.bigFile)),
			Budget: 1.02, NoLoss: true, File: big, Cold: true, Args: []string{"seqread", big}})
	}
	if want("mmap") {
		// One pass over a warm 1 GiB file takes some 15 ms, too short to
		// time to 2%: the helper maps and faults it in mmapRounds times.
		ws = append(ws, &workload{Name: "mmap", Title: fmt.Sprintf("warm mmap read %s ×%d", human(sz.bigFile), sz.mmapRounds),
			Budget: 1.02, NoLoss: true, File: big, Args: []string{"mmapread", big, strconv.Itoa(sz.mmapRounds)}})
	}
	if want("smallfiles") {
		tree := filepath.Join(dir, "pkgs")
		log("creating %d small files under %s", sz.smallFiles, tree)
		if err := os.Mkdir(tree, 0o755); err != nil {
			return "", nil, err
		}
		n := strconv.Itoa(sz.smallFiles)
		if out, err := exec.Command(work, "0", "mkfiles", tree, n).CombinedOutput(); err != nil {
			return "", nil, fmt.Errorf("create small files: %v: %s", err, out)
		}
		ws = append(ws, &workload{Name: "smallfiles", Title: fmt.Sprintf("open+read %d small files", sz.smallFiles),
			Budget: 1.05, NoLoss: true, Args: []string{"smallfiles", tree, n}, WarmFirst: true})
	}
	if want("forkexec") {
		truePath, err := exec.LookPath("true")
		if err != nil {
			return "", nil, fmt.Errorf("find true(1) for the fork/exec storm: %w", err)
		}
		ws = append(ws, &workload{Name: "forkexec", Title: fmt.Sprintf("fork+exec %d processes", sz.processes),
			Budget: 1.10, NoLoss: true, Args: []string{"forkexec", strconv.Itoa(sz.processes), truePath}})
	}
	if want("ctxswitch") {
		ws = append(ws, &workload{Name: "ctxswitch", Title: fmt.Sprintf("pipe ping-pong %dk switches", 2*sz.rounds/1000),
			Budget: 1.10, Args: []string{"pingpong", strconv.Itoa(sz.rounds)}, MinRate: minSwitchRate})
	}
	if want("groundtruth") {
		gt := filepath.Join(dir, "groundtruth.dat")
		log("writing %s (%d MiB)", gt, sz.gtFile>>20)
		if err := writeDataFile(gt, sz.gtFile, 2); err != nil {
			return "", nil, err
		}
		// The spin is a fixed amount of work, not a fixed time, so that
		// a slowdown shows in the wall time.
		rate, err := calibrate(work)
		if err != nil {
			return "", nil, err
		}
		iters := uint64(rate * sz.gtSpin.Seconds())
		ws = append(ws, &workload{Name: "groundtruth",
			Title:  fmt.Sprintf("sleep %v, cold read %s, spin %v", sz.gtSleep, human(sz.gtFile), sz.gtSpin),
			Budget: 1.05, NoLoss: true, File: gt, Cold: true,
			Args: []string{"groundtruth", gt, strconv.FormatInt(sz.gtSleep.Milliseconds(), 10), strconv.FormatUint(iters, 10)}})
	}
	pyws, err := setupPython(dir, src, sz, want, big, log)
	if err != nil {
		return "", nil, err
	}
	ws = append(ws, pyws...)
	stws, err := setupPythonStacks(dir, src, sz, want, big, log)
	if err != nil {
		return "", nil, err
	}
	ws = append(ws, stws...)
	ws = append(ws, networkWorkloads(sz, want)...)
	return work, ws, nil
}

// setupPython returns the Python workloads (testdata/bench/work.py run by
// /usr/bin/python3): the cost of the JIT sensor's path-syscall probes,
// which attach from a Python program's first instruction, where the C
// workloads never see them.
func setupPython(dir, src string, sz sizes, want func(string) bool, big string, log func(string, ...any)) ([]*workload, error) {
	if !want("pysmallfiles") && !want("pyimport") && !want("pyread") {
		return nil, nil
	}
	if _, err := os.Stat(python); err != nil {
		log("no %s: the Python workloads are skipped", python)
		return nil, nil
	}
	prog := []string{python, filepath.Join(src, "work.py")}
	var ws []*workload
	if want("pysmallfiles") {
		tree := filepath.Join(dir, "pytree")
		log("creating %d small files under %s", sz.smallFiles, tree)
		if err := os.Mkdir(tree, 0o755); err != nil {
			return nil, err
		}
		n := strconv.Itoa(sz.smallFiles)
		if out, err := exec.Command(filepath.Join(dir, "work"), "0", "mkfiles", tree, n).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("create small files: %v: %s", err, out)
		}
		ws = append(ws, &workload{Name: "pysmallfiles", Title: fmt.Sprintf("Python: stat+open+read %d small files", sz.smallFiles),
			Budget: 1.05, NoLoss: true, Prog: prog, Args: []string{"pysmallfiles", tree, n}, WarmFirst: true})
	}
	if want("pyimport") {
		// The modules this interpreter imports without error, listed once
		// (the listing also writes every .pyc: the runs are warm imports).
		list := filepath.Join(dir, "modules.txt")
		cmd := exec.Command(prog[0], prog[1], "0", "pymodules", list, strconv.Itoa(sz.pyModules))
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("list Python modules: %v: %s", err, out)
		}
		out, err := os.ReadFile(list)
		if err != nil {
			return nil, err
		}
		n := bytes.Count(out, []byte("\n"))
		log("%d importable modules (stdlib, numpy, torch when installed)", n)
		ws = append(ws, &workload{Name: "pyimport", Title: fmt.Sprintf("Python: import %d modules", n),
			Budget: 1.05, NoLoss: true, Prog: prog, Args: []string{"pyimport", list}, WarmFirst: true})
	}
	if want("pyread") {
		if _, err := os.Stat(big); err != nil {
			log("writing %s (%d MiB)", big, sz.bigFile>>20)
			if err := writeDataFile(big, sz.bigFile, 1); err != nil {
				return nil, err
			}
		}
		ws = append(ws, &workload{Name: "pyread", Title: fmt.Sprintf("Python: cold read %s, 1 MiB os.read", human(sz.bigFile)),
			Budget: 1.02, NoLoss: true, File: big, Cold: true, Prog: prog, Args: []string{"pyread", big}})
	}
	return ws, nil
}

// setupPythonStacks returns the cold Python workloads whose fills take
// Python stacks (each from a function of the script's own, so the walker
// has frames to walk): 64 KiB reads of the evicted big file, page faults
// on it mapped, and the import of an evicted package of coldModules
// modules (.py and .pyc evicted; their directories' entries stay cached).
func setupPythonStacks(dir, src string, sz sizes, want func(string) bool, big string, log func(string, ...any)) ([]*workload, error) {
	if !want("pyread64k") && !want("pymmapcold") && !want("pycoldimport") {
		return nil, nil
	}
	if _, err := os.Stat(python); err != nil {
		log("no %s: the Python workloads are skipped", python)
		return nil, nil
	}
	prog := []string{python, filepath.Join(src, "work.py")}
	var ws []*workload
	if want("pyread64k") || want("pymmapcold") {
		if _, err := os.Stat(big); err != nil {
			log("writing %s (%d MiB)", big, sz.bigFile>>20)
			if err := writeDataFile(big, sz.bigFile, 1); err != nil {
				return nil, err
			}
		}
	}
	if want("pyread64k") {
		ws = append(ws, &workload{Name: "pyread64k", Title: fmt.Sprintf("Python: cold read %s, 64 KiB reads, stacks", human(sz.bigFile)),
			Budget: 1.02, NoLoss: true, File: big, Cold: true, Prog: prog, Args: []string{"pyread64k", big}})
	}
	if want("pymmapcold") {
		ws = append(ws, &workload{Name: "pymmapcold", Title: fmt.Sprintf("Python: cold mmap faults %s, stacks", human(sz.bigFile)),
			Budget: 1.02, NoLoss: true, File: big, Cold: true, Prog: prog, Args: []string{"pymmap", big}})
	}
	if want("pycoldimport") {
		root := filepath.Join(dir, "coldpkg")
		log("writing a package of %d modules under %s", sz.coldModules, root)
		n := strconv.Itoa(sz.coldModules)
		if out, err := exec.Command(prog[0], prog[1], "0", "mkcoldpkg", root, n).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("write the evicted package: %v: %s", err, out)
		}
		ws = append(ws, &workload{Name: "pycoldimport", Title: fmt.Sprintf("Python: import %d evicted modules, stacks", sz.coldModules),
			Budget: 1.05, NoLoss: true, File: root, Cold: true, Prog: prog, Args: []string{"pycoldimport", root, n}})
	}
	return ws, nil
}

// writeDataFile writes size bytes of incompressible data and syncs them, so
// the pages are clean and can be evicted.
func writeDataFile(path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(seed, 0x636f6c6474726163))
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for i := 0; i+8 <= len(buf); i += 8 {
			v := r.Uint64()
			buf[i], buf[i+1], buf[i+2], buf[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			buf[i+4], buf[i+5], buf[i+6], buf[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		}
		n := min(int64(len(buf)), size-off)
		if _, err := f.Write(buf[:n]); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// calibrate asks the helper how many spin iterations it does a second.
func calibrate(work string) (float64, error) {
	out, err := exec.Command(work, "0", "calibrate").Output()
	if err != nil {
		return 0, fmt.Errorf("calibrate the spin: %w", err)
	}
	r, err := parseWork(out)
	if err != nil {
		return 0, fmt.Errorf("calibrate the spin: %w", err)
	}
	if r.Check == 0 {
		return 0, fmt.Errorf("calibrate the spin: zero iterations a second")
	}
	return float64(r.Check), nil
}

// workOutput is the line the helper prints.
type workOutput struct {
	EntryNS   int64   `json:"entry_ns"`
	StartNS   int64   `json:"start_ns"`
	ElapsedNS int64   `json:"elapsed_ns"`
	Late      bool    `json:"late"`
	Check     uint64  `json:"check"`
	Switches  uint64  `json:"switches"`
	CPUNS     int64   `json:"cpu_ns"`
	PhasesNS  []int64 `json:"phases_ns"`
}

// parseWork reads the helper's result: its last line that is a JSON object.
func parseWork(out []byte) (workOutput, error) {
	var r workOutput
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) > 0 && l[0] == '{' {
			if err := json.Unmarshal(l, &r); err != nil {
				return r, fmt.Errorf("bad helper output %q: %w", l, err)
			}
			return r, nil
		}
	}
	return r, fmt.Errorf("no result line in the helper's output %q", out)
}

func human(b int64) string {
	if b >= 1<<30 && b%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", b>>30)
	}
	return fmt.Sprintf("%d MiB", b>>20)
}

// findSrc locates testdata/bench from the working directory upwards.
func findSrc() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "testdata", "bench")
		if _, err := os.Stat(filepath.Join(p, "work.c")); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testdata/bench/work.c not found above the working directory; pass -src")
		}
		dir = parent
	}
}
