// Command bench measures what coldtrace costs the commands it traces.
//
//	sudo go run ./cmd/bench -coldtrace bin/coldtrace [-pairs 7] [-max-pairs 40] [-json out.json]
//	sudo go run ./cmd/bench -coldtrace bin/coldtrace -smoke
//
// Each workload runs untraced (U) and traced (T, `coldtrace -q --json … --
// CMD`), interleaved U T U T … U: N pairs and a closing untraced run, so
// every traced run has an untraced run on each side. A traced run's ratio
// is its wall time over the mean of its two neighbours, which cancels a
// slow drift of the machine; the table gives the median ratio, its 90%
// percentile-bootstrap interval, and the drift itself (last untraced run
// against the first). A budget is met when the whole interval is within
// it, missed when the median is over it, and undecided otherwise: on a
// noisy machine -max-pairs N adds pairs, up to N, until it is decided.
//
// Wall time is the workload's own: the helper program (testdata/bench/
// work.c) reads CLOCK_MONOTONIC when it starts its work and when it ends,
// and prints the difference. Traced and untraced runs are timed by the same
// code over the same span, so the ratio compares like with like: it holds
// everything coldtrace does to the command while the command runs (probe
// time in the command's context, coldtrace's polling competing for the two
// CPUs) and nothing else. coldtrace's own startup (launch → command
// released) is reported apart, from startup_ns in its JSON summary, and
// checked against the external view (harness spawn → workload main()).
//
// Before each run of a cold workload the harness waits -settle: the
// machine's free-page reporting returns freed memory to the host about 2 s
// after it is freed, and waiting lets the previous run's frees finish.
// Warm workloads wait -settle-warm, none by default: on this VM a wait
// spreads the neighbours of a traced run apart in time, and its drift
// with them (the fork/exec row's 90% interval over 45 pairs was
// 0.993–1.147 with 3 s before each run, 1.067–1.117 with none). Then the
// harness sets the page cache (evicts the data file with
// posix_fadvise(DONTNEED), or makes it fully resident), then launches with a start time -delay ahead: the workload
// sleeps until that instant, so the delay from eviction to the first read is
// the same whether coldtrace starts in front of it or not.
//
// Others share the machine: each run records the share of the CPUs that
// other processes used during it (from /proc/stat less the run's own CPU
// time), and a run where that exceeds -max-bg is repeated (-redos times at
// most) — the harness waits for a quieter moment rather than average over
// someone else's build. The first-vs-last untraced drift shows what is
// left.
//
// Workloads (bench/workloads.go, helper testdata/bench/work.c, built with
// cc at run time; data generated in a temporary directory):
//
//	seqread      cold sequential read of 1 GiB, 1 MiB read()s, evicted first
//	mmap         warm mmap of the same file, one byte per page, 16 times
//	             (one pass is ~15 ms, too short to time to 2%)
//	smallfiles   stat+open+fstat+read+close of 20,000 cached 0.5–16 KiB files
//	forkexec     2,000 fork+exec+wait of true(1), one after the other
//	ctxswitch    300k pipe round trips between two threads pinned to one
//	             CPU (~400k switches/s untraced)
//	groundtruth  sleep 1 s, cold read of 512 MiB, spin ~1 s of fixed work
//	pysmallfiles the same 20,000 files, stat+open+read+close from
//	             /usr/bin/python3 (the JIT sensor's path probes attach)
//	pyimport     every importable non-test module of the standard
//	             library, numpy and torch (when installed), .pyc present
//	pyread       the cold 1 GiB read in Python, 1 MiB os.read calls
//	pyread64k    the cold 1 GiB read in Python, 64 KiB os.read calls in a
//	             function (a Python stack at each fill)
//	pymmapcold   the cold 1 GiB file mapped in Python, one byte per page
//	pycoldimport 2,000 modules of a package whose .py and .pyc are evicted
//
// The collateral row (collateral.go, helpers testdata/bench/collateral.c
// and collateral.py): untraced loops pinned to one CPU — getppid, a
// cached 1-byte pread, a pipe ping-pong, Python small files, getaddrinfo
// of localhost — beside coldtrace tracing a shell, a Python program, a
// download, a framework (path-syscall probes on), beside `coldtrace
// attach`, and beside empty BPF programs on the same tracepoints (the
// floor), each against the same loops alone (-collateral-pairs pairs).
//
// -floor adds a third run to each pair (F): the workload untraced beside
// empty BPF programs on every tracepoint coldtrace attaches to, the least
// any tracer there costs (each program's dispatch in the kernel). Its
// median ratio, against the same untraced neighbours, is printed beside
// the traced one: the traced ratio less the floor is coldtrace's own work.
// The floor's place in a pair alternates (T F, then F T).
//
// -long D runs one traced long run instead (testdata/bench/work.py
// pylong): 32 threads reading files, a compiler every 3 s; it reports
// coldtrace's CPU, its RSS at one minute and at the end, the record's size
// and lost events, and checks the attribution invariants on the record.
//
// Exit status: 0 when every budget is met (or -smoke, or skipped: not
// root), 1 when a budget is missed (each miss is named), 2 on errors.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

type options struct {
	coldtrace string
	pairs     int
	// maxPairs is how many pairs a row may grow to while its interval
	// holds its budget (at least pairs).
	maxPairs int
	warmup   int
	smoke    bool
	jsonPath string
	only     []string
	dir      string
	src      string
	delay    time.Duration
	settle   time.Duration
	// settleWarm is settle for workloads that read no evicted data.
	settleWarm time.Duration
	bpfStats   string
	ctArgs     []string
	maxBg      float64
	redos      int
	profDir    string
	long       time.Duration
	// collateralPairs is the collateral row's pairs per cell (0: no row).
	collateralPairs int
	// floor adds a floor run (F) to each pair: the workload untraced
	// beside empty programs on coldtrace's tracepoints.
	floor bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.coldtrace, "coldtrace", "bin/coldtrace", "the coldtrace binary to measure")
	fs.IntVar(&o.pairs, "pairs", 7, "untraced/traced pairs per workload (a closing untraced run is added); this VM's run-to-run noise needs more than 5 for a 2% budget")
	fs.IntVar(&o.maxPairs, "max-pairs", 0, "add pairs to a workload, up to `N`, while the 90% interval of its median ratio holds its budget (default: -pairs, none added)")
	fs.IntVar(&o.warmup, "warmup", 1, "untraced runs before the measured ones, discarded (0 with -smoke)")
	fs.BoolVar(&o.smoke, "smoke", false, "one pair per workload, small sizes, no budget check (for make test)")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to `PATH`")
	only := fs.String("only", "", "comma-separated workloads to run (default all): "+strings.Join(workloadNames, ","))
	fs.StringVar(&o.dir, "dir", "", "where to create the data files (default $TMPDIR); must not be tmpfs")
	fs.StringVar(&o.src, "src", "", "testdata/bench directory (default: found from the working directory)")
	fs.DurationVar(&o.delay, "delay", 400*time.Millisecond, "from setting the page cache to the workload's start, the same traced and untraced; must exceed coldtrace's startup (300ms with -smoke)")
	fs.DurationVar(&o.settle, "settle", 3*time.Second, "quiet wait before each run of a cold workload (0 with -smoke)")
	fs.DurationVar(&o.settleWarm, "settle-warm", 0, "quiet wait before each run of a warm workload")
	fs.StringVar(&o.bpfStats, "bpf-stats", "auto", "per-program BPF run time from one extra traced run: off, auto (workloads that miss a budget), all")
	fs.Float64Var(&o.maxBg, "max-bg", 0.25, "repeat a run when other processes used more than this share of the CPUs during it (1: never)")
	fs.IntVar(&o.redos, "redos", 3, "times a run may be repeated for -max-bg")
	fs.StringVar(&o.profDir, "profile-dir", "", "with -bpf-stats: also write coldtrace's CPU profile of that run to `DIR`/coldtrace-WORKLOAD.pprof (COLDTRACE_CPUPROFILE)")
	fs.DurationVar(&o.long, "long", 0, "instead of the workloads, one traced long run of `D` (e.g. 10m): 32 Python threads re-reading files, a compiler every 3 s; coldtrace's CPU, RSS growth, record size and lost events against per-hour bounds")
	fs.BoolVar(&o.floor, "floor", false, "add to each pair a run of the workload untraced beside empty BPF programs on coldtrace's tracepoints (F): the floor any tracer there costs, apart from coldtrace's own work")
	fs.IntVar(&o.collateralPairs, "collateral-pairs", 15, "pairs per cell of the collateral row (untraced loops beside coldtrace and alone; 0: no row; 1 with -smoke)")
	ctArgs := fs.String("coldtrace-args", "", "extra coldtrace flags, space-separated (e.g. --no-gpu)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *only != "" {
		for _, n := range strings.Split(*only, ",") {
			if !validWorkload(n) && n != "collateral" {
				return o, fmt.Errorf("-only: no workload %q (have %s)", n, strings.Join(workloadNames, ","))
			}
			o.only = append(o.only, n)
		}
	}
	o.ctArgs = strings.Fields(*ctArgs)
	if o.smoke {
		o.pairs = 1
	}
	if o.pairs < 1 {
		return o, fmt.Errorf("-pairs %d: need at least 1", o.pairs)
	}
	if o.smoke || o.maxPairs < o.pairs {
		o.maxPairs = o.pairs
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.smoke {
		if !set["delay"] {
			o.delay = 300 * time.Millisecond
		}
		if !set["settle"] {
			o.settle = 0
		}
		if !set["warmup"] {
			o.warmup = 0
		}
		if !set["collateral-pairs"] {
			o.collateralPairs = 1
		}
	}
	switch o.bpfStats {
	case "off", "auto", "all":
	default:
		return o, fmt.Errorf("-bpf-stats %q: want off, auto or all", o.bpfStats)
	}
	if o.smoke {
		if o.bpfStats == "auto" {
			o.bpfStats = "off"
		}
		o.redos = 0
	}
	return o, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	if why := cannotRun(); why != "" {
		if o.smoke {
			fmt.Fprintf(stdout, "bench: smoke skipped: %s\n", why)
			return 0
		}
		fmt.Fprintf(stderr, "bench: %s\n", why)
		return 2
	}
	if o.long > 0 {
		lr, err := benchLong(o, stdout, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench: error: %v\n", err)
			return 2
		}
		lr.print(stdout)
		if o.jsonPath != "" {
			if err := writeJSON(o.jsonPath, lr); err != nil {
				fmt.Fprintf(stderr, "bench: error: %v\n", err)
				return 2
			}
		}
		if len(lr.Misses) > 0 {
			for _, m := range lr.Misses {
				fmt.Fprintf(stdout, "  MISS long: %s\n", m)
			}
			return 1
		}
		return 0
	}
	res, err := benchmark(o, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: error: %v\n", err)
		return 2
	}
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, res); err != nil {
			fmt.Fprintf(stderr, "bench: error: %v\n", err)
			return 2
		}
	}
	if o.smoke {
		fmt.Fprintln(stdout, "bench: smoke run, budgets not checked")
		return 0
	}
	if len(res.Misses) > 0 {
		fmt.Fprintf(stdout, "\nbench: %d budget(s) missed:\n", len(res.Misses))
		for _, m := range res.Misses {
			fmt.Fprintf(stdout, "  MISS %s\n", m)
		}
		return 1
	}
	fmt.Fprintln(stdout, "\nbench: every budget met")
	return 0
}

// cannotRun says why coldtrace cannot run on this machine, or "".
func cannotRun() string {
	if os.Geteuid() != 0 {
		return "needs root (coldtrace loads eBPF programs); run it with sudo"
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return "this kernel exposes no BTF (/sys/kernel/btf/vmlinux), which coldtrace needs"
	}
	return ""
}
