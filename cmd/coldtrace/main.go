// Command coldtrace runs a command and tells where its wall-clock time
// went: page-cache misses, compiles, GPU work, CPU and waiting.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"time"

	// Grows the descriptor table before the runtime's threads exist: a
	// growth later waits for an RCU grace period (package doc).
	_ "github.com/coldtrace/coldtrace/internal/fdtable"
	"github.com/coldtrace/coldtrace/trace/launch"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// exitUsage and exitFailure follow env(1) and timeout(1): codes a command
// rarely uses, so a script can tell coldtrace's failure from the
// command's.
const (
	exitUsage   = 125
	exitFailure = 125
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == launch.ShimArg {
		launch.RunShim()
	}
	keepHeapNearLive(os.Getenv)
	stop := startSelfProfile()
	code := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, time.Now())
	stop()
	os.Exit(code)
}

// keepHeapNearLive has the garbage collector run when the heap has grown
// by half of what is live, not by all of it (Go's default), unless the
// user set GOGC or GOMEMLIMIT. A long run's heap is mostly its bounded
// timeline; at the default the heap, and with it coldtrace's RSS, crept
// up for minutes toward twice that (37 MiB at one minute, 58 MiB at ten
// in bench -long), at a garbage rate so low that the extra collections
// cost next to nothing.
func keepHeapNearLive(getenv func(string) string) {
	if getenv("GOGC") == "" && getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(50)
	}
}

// looseHeapWhileLoading stops the garbage collector while the sensors
// load, up to loadHeapLimit of heap, and returns what puts
// keepHeapNearLive's policy back (called once they are loaded, and again
// at the end). The load allocates much and keeps most of it until the
// command is released (the kernel's BTF, each object's parsed spec): at
// 50% the collector ran some ten times in the first 100 ms and took a
// third of the scheduler's load; at 400%, still 38 ms of a start's 173 ms
// of CPU, its mark workers beside the verifier's lanes on two CPUs,
// for 2.4 MiB of peak RSS saved (53.6 against 51.2 MiB).
func looseHeapWhileLoading(getenv func(string) string) (settle func()) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	debug.SetMemoryLimit(loadHeapLimit)
	debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(50)
		debug.SetMemoryLimit(math.MaxInt64)
	}
}

// loadHeapLimit is where the collector runs during the load all the
// same: a load takes some 50 MiB.
const loadHeapLimit = 256 << 20

// run dispatches the subcommands and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, launched time.Time) int {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			return runCommand(ctx, args[1:], stdout, stderr, launched)
		case "attach":
			return attachCommand(ctx, args[1:], stdout, stderr, launched)
		case "mark":
			return markCommand(args[1:], stdout, stderr)
		case "report":
			return reportCommand(args[1:], stdout, stderr)
		case "diff":
			return diffCommand(args[1:], stdout, stderr)
		case "merge":
			return mergeCommand(args[1:], stdout, stderr)
		case "status":
			return statusCommand(args[1:], stdout, stderr)
		case "evict":
			return evictCommand(args[1:], stdout, stderr)
		case "prefetch":
			return prefetchCommand(args[1:], stdout, stderr)
		case "doctor":
			return doctorCommand(ctx, args[1:], stdout, stderr)
		case "bench":
			return benchCommand(ctx, args[1:], stdout, stderr)
		case "version", "--version":
			fmt.Fprintf(stdout, "coldtrace %s\n", version)
			return 0
		case "help", "--help", "-h":
			printUsage(stdout)
			return 0
		}
	}
	return runCommand(ctx, args, stdout, stderr, launched)
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `coldtrace: why was the first run slow?

usage:
  sudo coldtrace [flags] -- COMMAND [ARGS...]   trace a command (same as 'coldtrace run')
  sudo coldtrace attach --pid PID[,PID...] | --cgroup DIR [--duration D] [--split-idle D] [-o PATH]
                                                trace running processes until Ctrl-C, D, or their exit
  coldtrace mark [--pid PID] LABEL              cut the running trace into segments here
  coldtrace report [--json] [--pprof PATH] [--timeline PATH] [-o PATH] RECORD
                                                re-render a saved record (no root needed)
  coldtrace diff [--json] A B                   compare two records (cold first)
  coldtrace merge [--json] RECORD...            one answer for the ranks of a job: slowest rank and why
  coldtrace status [--from RECORD] [--json] [-o PATH] [PATH...]
                                                page cache and kernel caches now; predicts the next run
  coldtrace evict [--json] [-o PATH] PATH...|--from RECORD
                                                drop exactly these files from the page cache
  coldtrace prefetch [--dry-run] [--force] [--json] [-o PATH] PATH...|--from RECORD
                                                read only what is not cached
  sudo coldtrace doctor [--dir DIR]             check tracing and page-cache counting on this machine
  sudo coldtrace bench [-n PAIRS] --a 'CMD' --b 'CMD' | --cold-warm -- CMD   interleaved A/B runs: drift, verdict, why
  coldtrace version

run 'coldtrace run --help', 'coldtrace report --help' or 'coldtrace diff --help' for flags.
`)
}

// fail prints one line, the way every error reaches the user. A usage
// error says "usage" once: the errUsage mark that wraps it is for the
// code, not the reader, whose line often ends in the usage itself.
func fail(stderr io.Writer, code int, err error) int {
	fmt.Fprintf(stderr, "coldtrace: error: %s\n", strings.TrimPrefix(errorText(err), errUsage.Error()+": "))
	return code
}

var errUsage = errors.New("usage")
