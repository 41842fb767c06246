package pagecache_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/pagecache"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// noRseq runs a command with glibc's rseq registration off: its threads'
// fills then need the read exits (the tests of those exits), as Go's,
// musl's and older glibc's do.
func noRseq(command ...string) []string {
	return append([]string{"env", "GLIBC_TUNABLES=glibc.pthread.rseq=0"}, command...)
}

// On a kernel that refuses task works, the syscall exit tracepoint that
// ends fills goes on at the first fill, not before: a run that fills
// nothing from disk never puts the machine's other processes on the
// syscall slow path, and one that reads a cold file after a pause gets
// it then. The record says when.
func TestReadExitsGoOnAtTheFirstFill(t *testing.T) {
	requireReadExits(t)
	path := diskFile(t)
	missed := func(rec *record.Record) (files []string) {
		for _, f := range rec.Files {
			if f.PagesMissed > 0 {
				files = append(files, f.Path)
			}
		}
		return files
	}

	makeWarm(t, path)
	warm := traceRun(t, noRseq("cat", path))
	if warm.FillEnd != record.FillEndReadExit {
		t.Errorf("warm run: fill_end %q", warm.FillEnd)
	}
	// A binary or library DAMON paged out fills on its exec: then the
	// exits may go on, and only then.
	if m := missed(warm); warm.ReadExitsFromNS != nil && len(m) == 0 {
		t.Errorf("warm run: read exits on at %d ns with no page missed", *warm.ReadExitsFromNS)
	} else if warm.ReadExitsFromNS != nil {
		t.Logf("warm run: read exits on at %d ns for %q", *warm.ReadExitsFromNS, m)
	}

	const pause = 300 * time.Millisecond
	makeCold(t, path)
	cold := traceRun(t, noRseq("sh", "-c", `sleep 0.3; exec cat "$1"`, "sh", path))
	from := cold.ReadExitsFromNS
	if from == nil || *from > cold.WallNS {
		t.Fatalf("cold run: read exits from %v in a %d ns run, want on while it read", from, cold.WallNS)
	}
	m := missed(cold)
	if len(m) == 1 && m[0] == path && time.Duration(*from) < pause {
		t.Errorf("cold run: read exits on at %v, before the cold read that followed a %v pause (files missed: %q)", time.Duration(*from), pause, m)
	}
	t.Logf("cold run: read exits on at %v of %v; files missed %q", time.Duration(*from), time.Duration(cold.WallNS), m)
}

// The read exits come off again once no read has filled a page for a
// quiet spell, and go on at the next cold read: a run that loads and
// then computes stops slowing the machine's other processes. The
// command counts the tracepoints' perf events this process holds while
// it runs; the record gives each interval.
func TestReadExitsComeOffAfterAQuietSpell(t *testing.T) {
	requireReadExits(t)
	first, second := diskFile(t), diskFile(t)
	makeCold(t, first)
	makeCold(t, second)
	counts := filepath.Join(t.TempDir(), "counts")
	quiet := pagecache.ReadExitsQuiet.Seconds()
	script := fmt.Sprintf(`count() { ls -l /proc/%d/fd | grep -c 'anon_inode:\[perf_event\]'; }
cat "$1" >/dev/null
sleep 0.3; on=$(count)
sleep %.1f; off=$(count)
cat "$2" >/dev/null
sleep 0.3; again=$(count)
echo "$on $off $again" > "$3"`, os.Getpid(), 3*quiet)
	rec := traceRun(t, noRseq("sh", "-c", script, "sh", first, second, counts))
	b, err := os.ReadFile(counts)
	if err != nil {
		t.Fatal(err)
	}
	var on, off, again int
	if _, err := fmt.Sscan(string(b), &on, &off, &again); err != nil {
		t.Fatalf("counts %q: %v", b, err)
	}
	if !(off < on && off < again) {
		t.Errorf("perf events held after the first read, %v later and after the second: %d, %d, %d; want fewer in the quiet spell", time.Duration(3*quiet*float64(time.Second)), on, off, again)
	}
	spans := rec.ReadExitSpans
	t.Logf("perf events held: %d, %d, %d; read exits on %+v", on, off, again, spans)
	checkOffThenOn(t, "read exit", spans, rec.WallNS)
	if from := rec.ReadExitsFromNS; from == nil || *from != spans[0].FromNS {
		t.Errorf("read_exits_from_ns %v, want the first span's start %d", from, spans[0].FromNS)
	}
	for _, path := range []string{first, second} {
		var missed uint64
		for _, f := range rec.Files {
			if f.Path == path {
				missed = f.PagesMissed
			}
		}
		if missed != filePages {
			t.Errorf("%s: %d pages missed, want %d", path, missed, filePages)
		}
	}
	if rec.FillEnd != record.FillEndReadExit {
		t.Errorf("fill_end %q, want %q", rec.FillEnd, record.FillEndReadExit)
	}
}

// The program that ends fills at the return to user space comes off
// once no fill has asked for it for a quiet spell, and goes on again at
// the next cold read, whose fills then end at their return as the
// first read's did: a run that loads and then computes stops costing
// the machine's other processes its test at every return after a
// switch. A Python reader with an rseq area reads two sets of cold
// files with a pause between, counting the BPF links this process
// holds after each; the record gives each interval.
func TestRseqReturnComesOffAfterAQuietSpell(t *testing.T) {
	python := requireRseqReturns(t)
	dir := e2eutil.DiskDir(t)
	const perSet = 40
	var first, second []string
	for i := 0; i < 2*perSet; i++ {
		path := filepath.Join(dir, fmt.Sprintf("m%03d.pyc", i))
		if err := os.WriteFile(path, make([]byte, 12<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		if i < perSet {
			first = append(first, path)
		} else {
			second = append(second, path)
		}
	}
	if err := exec.Command("sync").Run(); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(append([]string(nil), first...), second...) {
		makeCold(t, p)
	}
	out := filepath.Join(t.TempDir(), "out")
	reader := `import os, sys, time
` + pySwitches + `links = lambda: sum(os.readlink(f"/proc/%d/fd/{fd}") == "anon_inode:bpf_link" for fd in os.listdir("/proc/%d/fd"))
waited = 0
def read(paths):
    global waited
    for i, path in enumerate(paths):
        fd = os.open(path, os.O_RDONLY)
        before = switches()
        os.read(fd, os.fstat(fd).st_size)  # under 64 KiB: one that does not wait asks for no exit
        waited += switches() > before
        os.close(fd)
        if i == 0:
            time.sleep(0.2)  # the program goes on at this read: beside a busy loop, some 10 ms later
n = int(sys.argv[2])
read(sys.argv[3:3 + n])
time.sleep(0.3); on = links()
time.sleep(%.1f); off = links()
read(sys.argv[3 + n:])
time.sleep(0.3); again = links()
open(sys.argv[1], "w").write(f"{on} {off} {again} {waited}")
`
	quiet := pagecache.ReadExitsQuiet.Seconds()
	script := fmt.Sprintf(reader, os.Getpid(), os.Getpid(), 3*quiet)
	rec := traceRun(t, append([]string{python, "-c", script, out, fmt.Sprint(perSet)}, append(first, second...)...))
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var on, off, again, waited int
	if _, err := fmt.Sscan(string(b), &on, &off, &again, &waited); err != nil {
		t.Fatalf("reader wrote %q: %v", b, err)
	}
	spans := rec.RseqReturnSpans
	t.Logf("BPF links held: %d, %d, %d; %d of %d reads waited, %d fills ended at their return; on %+v",
		on, off, again, waited, 2*perSet, rec.FillsEndedAtReturn, spans)
	if !(off < on && off < again) {
		t.Errorf("BPF links held after the first reads, %v later and after the second: %d, %d, %d; want fewer in the quiet spell",
			time.Duration(3*quiet*float64(time.Second)), on, off, again)
	}
	checkOffThenOn(t, "rseq return", spans, rec.WallNS)
	// The second set's fills end at their return too: the program went
	// back on for them (tolerance as in the test above).
	if short := waited - int(rec.FillsEndedAtReturn); waited == 0 || short > int(rec.Self.SwitchOutsUnseen)+waited/10 {
		t.Errorf("%d fills ended at their return, want the %d reads that waited (less %d switch outs unseen and 10%%)",
			rec.FillsEndedAtReturn, waited, rec.Self.SwitchOutsUnseen)
	}
	if len(rec.ReadExitSpans) != 0 {
		t.Errorf("read exits on %+v: no read needed them", rec.ReadExitSpans)
	}
}

// requireReadExits skips where the kernel lets a task work end each
// fill: there are no read exits to attach.
func requireReadExits(t *testing.T) {
	t.Helper()
	testenv.RequireTracing(t)
	taskWorks, err := pagecache.TaskWorksAllowed(nil)
	if err != nil {
		t.Fatal(err)
	}
	if taskWorks {
		t.Skip("this kernel lets a task work end each fill: no read exits to attach")
	}
}

// Small cold reads by a program whose threads have rseq areas (glibc
// 2.35 and later) need no syscall tracepoint: each read that waited for
// its disk ends its fill at its return to user space, which the switch
// out makes the kernel report (rseq_update), and one that did not wait
// ends at the next look without asking for the read's exit. So a cold
// import-like run never puts the machine's other processes on the
// syscall slow path. The reader tells which of its reads switched out
// (its voluntary context switches around each read): those ended at
// their return, all but a few (up to a tenth) under load. Without rseq the same reads put the exits on.
func TestSmallColdReadsEndAtTheirReturnWithoutSyscallTracepoints(t *testing.T) {
	python := requireRseqReturns(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := e2eutil.DiskDir(t)
	const files = 120
	paths := make([]string, files)
	pages := map[string]uint64{}
	for i := range paths {
		size := 1 + rng.IntN(60<<10) // one read each, under 64 KiB
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		paths[i] = filepath.Join(dir, fmt.Sprintf("m%03d.pyc", i))
		if err := os.WriteFile(paths[i], data, 0o644); err != nil {
			t.Fatal(err)
		}
		pages[paths[i]] = uint64(size+4095) / 4096
	}
	if err := exec.Command("sync").Run(); err != nil {
		t.Fatal(err)
	}
	const reader = `import os, sys
` + pySwitches + `waited = 0
for path in sys.argv[2:]:
    fd = os.open(path, os.O_RDONLY)
    n = os.fstat(fd).st_size
    before = switches()
    if len(os.read(fd, n)) != n:
        sys.exit("short read")
    waited += switches() > before
    os.close(fd)
open(sys.argv[1], "w").write(str(waited))
`
	run := func(name string, command []string) (*record.Record, int) {
		for _, p := range paths {
			makeCold(t, p)
		}
		out := filepath.Join(t.TempDir(), "waited")
		rec := traceRun(t, append(command, append([]string{out}, paths...)...))
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var waited int
		if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &waited); err != nil {
			t.Fatalf("%s: %q: %v", name, b, err)
		}
		for _, f := range rec.Files {
			if want, ok := pages[f.Path]; ok && f.PagesMissed != want {
				t.Errorf("%s: %s: %d pages missed, want %d", name, f.Path, f.PagesMissed, want)
			}
		}
		t.Logf("%s: %d of %d reads waited; %d fills ended at their return; read exits %+v", name, waited, files,
			rec.FillsEndedAtReturn, rec.ReadExitSpans)
		return rec, waited
	}

	rec, waited := run("rseq", []string{python, "-c", reader})
	if len(rec.ReadExitSpans) != 0 || rec.ReadExitsFromNS != nil {
		t.Errorf("rseq: read exits on %+v: no read needed them", rec.ReadExitSpans)
	}
	// The reader's count is of the read's voluntary switches, not of
	// its fill's: beside a busy loop, or on a machine short of memory, a
	// read can wait before its fill opens (a lock, reclaim for the new
	// pages) and find its pages read by the time it would wait for them,
	// and then it ends at the next look, as a read that never waited
	// does. A switch out also now and then does not reach the program
	// (counted as unseen). One in 120 did so in a loaded run, three in a
	// clean one, eight in a later loaded run (the VM slower that hour);
	// more than 10% is a fault (a fill end lost for good ends none).
	short := waited - int(rec.FillsEndedAtReturn)
	if waited == 0 || short > int(rec.Self.SwitchOutsUnseen)+waited/10 {
		t.Errorf("rseq: %d fills ended at their return, want the %d reads that waited (less %d switch outs unseen and 10%%)",
			rec.FillsEndedAtReturn, waited, rec.Self.SwitchOutsUnseen)
	}
	if rec.FillEnd != record.FillEndReadExit {
		t.Errorf("rseq: fill_end %q, want %q", rec.FillEnd, record.FillEndReadExit)
	}

	rec, _ = run("no rseq", noRseq(python, "-c", reader))
	if len(rec.ReadExitSpans) == 0 || rec.FillsEndedAtReturn != 0 {
		t.Errorf("no rseq: read exits %+v, %d fills ended at their return: want the exits on and none",
			rec.ReadExitSpans, rec.FillsEndedAtReturn)
	}
}

// pySwitches defines switches(), the calling thread's voluntary context
// switches so far, for a Python reader that counts the reads that
// waited. The status file is opened once and read with pread: a switch
// counted around a read should be the read's, not an open's.
const pySwitches = `status = os.open("/proc/thread-self/status", os.O_RDONLY)
def switches():
    for line in os.pread(status, 8192, 0).split(b"\n"):
        if line.startswith(b"voluntary_ctxt_switches"):
            return int(line.split()[1])
`

// requireRseqReturns skips where fills cannot end at the return to user
// space (task works end them, or there is no rseq_update tracepoint) or
// there is no python3, and gives python3's path.
func requireRseqReturns(t *testing.T) string {
	t.Helper()
	requireReadExits(t)
	if ok, err := probe.HasTracepoint(nil, "rseq_update"); err != nil || !ok {
		t.Skipf("this kernel has no rseq_update tracepoint (%v): fills end at the read exits", err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	return python
}

// checkOffThenOn holds the intervals a lazily attached program was on,
// in a run of wall ns that read from disk twice with a quiet spell
// between, to two: the first off after the quiet spell and before the
// second, the second on until the end.
func checkOffThenOn(t *testing.T, what string, spans []record.ReadExitSpan, wall int64) {
	t.Helper()
	if len(spans) != 2 {
		t.Fatalf("%s spans %+v, want two: one per set of cold reads", what, spans)
	}
	if spans[0].Off == "" || spans[0].ToNS >= spans[1].FromNS || spans[0].ToNS-spans[0].FromNS < int64(pagecache.ReadExitsQuiet) {
		t.Errorf("%s: first span %+v, second %+v: want the first off after a quiet spell, before the second", what, spans[0], spans[1])
	}
	if spans[1].Off != "" || spans[1].ToNS != wall {
		t.Errorf("%s: second span %+v: want it on until the end of the %d ns run", what, spans[1], wall)
	}
}
