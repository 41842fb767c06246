package doctor

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/trace/launch"
)

// TestMain lets the test binary be the gated shim of the traced reads.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == launch.ShimArg {
		launch.RunShim()
	}
	os.Exit(m.Run())
}

// TestTargets: the attachments come from the sensors' own objects, the
// path syscalls from the JIT sensor's list.
func TestTargets(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range objects() {
		spec, err := o.load()
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range targetsOf(spec, o.pathSyscalls) {
			seen[tg.String()] = true
			if tg.group == "syscalls" && tg.optional == (tg.name == "sys_enter_openat" || tg.name == "sys_exit_openat") {
				t.Errorf("%s optional = %v", tg, tg.optional)
			}
		}
	}
	for _, want := range []string{"tp_btf sched_switch", "tp_btf mm_filemap_get_pages", "tp_btf mm_filemap_delete_from_page_cache", "tp_btf mm_vmscan_memcg_reclaim_begin",
		"tracepoint syscalls:sys_enter_openat", "tracepoint syscalls:sys_exit_statx", "tp_btf sock_recv_length"} {
		if !seen[want] {
			t.Errorf("no check of %s among %v", want, seen)
		}
	}
}

func TestWrite(t *testing.T) {
	r := &Report{Checks: []Check{{Status: OK, Name: "root"},
		{Status: Fail, Name: "tp_btf x (page cache)", Detail: "attach: no such tracepoint", Lacks: "page-cache misses"}}}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  ok    root\n", "  FAIL  tp_btf x (page cache): attach: no such tracepoint\n", "1 ok, 0 notes, 1 failed",
		"a report here would lack:\n  page-cache misses (tp_btf x (page cache)): FAIL"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestNVML: present through the library's mock of a DGX H100, absent
// through the real library on a machine without one.
func TestNVML(t *testing.T) {
	if c := checkNVML(dgxh100.New()); c.Status != OK {
		t.Errorf("mock DGX H100: %+v", c)
	}
	if c := checkNVML(nvml.New()); c.Status == Fail {
		t.Errorf("absent NVML is a failure: %+v", c)
	}
}

func doctorRun(t *testing.T, opts Options) (*Report, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	opts.Actor = a
	r := Run(ctx, opts)
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	return r, b.String()
}

// TestDoctorPasses: here, everything works and the counts of a cold and
// a warm whole-file read are exact.
func TestDoctorPasses(t *testing.T) {
	testenv.RequireTracing(t)
	r, out := doctorRun(t, Options{Dir: t.TempDir()})
	t.Log("\n" + out)
	if f := r.Failed(); len(f) > 0 {
		t.Errorf("failed here: %+v", f)
	}
	// Every BPF object of the session's table is checked, the stack
	// walker's too. The warm read misses exactly the pages cachestat
	// found uncached just before it (the check fails otherwise): none,
	// unless the machine reclaimed some since the cold read (seen: 3 of
	// 2,048 on a quiet VM).
	for _, want := range []string{"  ok    tp_btf sched_switch (scheduler)", "  ok    tp_btf sched_process_exec (Python stacks)", "  ok    uprobes: a uprobe on coldtrace's own code fired once"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The cold read misses every page once, and again each page the
	// machine evicted during the read (then counted as read again).
	cold := regexp.MustCompile(`(?m)^  ok    page cache, cold read of a 2048-page file in .*: (\d+) pages missed, 2048 accessed(?: \((\d+) of them read again)?`).FindStringSubmatch(out)
	if cold == nil {
		t.Fatalf("report lacks a passed cold read of 2048 pages")
	}
	missed, _ := strconv.Atoi(cold[1])
	again := 0
	if cold[2] != "" {
		again, _ = strconv.Atoi(cold[2])
	}
	if missed-again != 2048 {
		t.Errorf("cold read: %d pages missed, %d of them again; want 2048 once", missed, again)
	}
	// The verifier's time is read from its statistics, for the page
	// cache's object too (its slowest program named).
	if !regexp.MustCompile(`(?m)^  (ok  |note)  verification, most of coldtrace's start: the kernel's verifier took [0-9.]+(µs|ms|s) .*page cache [0-9.]+(µs|ms|s) \(on_`).MatchString(out) {
		t.Errorf("report lacks the verifier's time per object")
	}
	if !regexp.MustCompile(`(?m)^  ok    page cache, warm read of a 2048-page file in .*: \d+ pages missed, 2048 accessed`).MatchString(out) {
		t.Errorf("report lacks a passed warm read of 2048 pages")
	}
}

// TestDoctorHiddenTracepoint: a tracepoint made unavailable fails the
// check-up with its name; a hidden optional one (a path syscall, TCP's
// send) is a note that says what a run lacks.
func TestDoctorHiddenTracepoint(t *testing.T) {
	testenv.RequireTracing(t)
	hide := []string{"mm_filemap_get_pages", "sys_enter_openat", "sys_enter_chdir", "tcp_sendmsg_locked"}
	if env := os.Getenv("COLDTRACE_TEST_DOCTOR_HIDE"); env != "" {
		hide = strings.Split(env, ",")
	}
	r, out := doctorRun(t, Options{Dir: t.TempDir(), Hide: hide})
	t.Log("\n" + out)
	failed := map[string]bool{}
	for _, c := range r.Failed() {
		failed[c.Name] = true
	}
	for _, want := range []string{"tp_btf mm_filemap_get_pages (page cache)", "tracepoint syscalls:sys_enter_openat (JIT)"} {
		if !failed[want] || !strings.Contains(out, "FAIL  "+want) {
			t.Errorf("hidden %s did not fail loudly: %v", want, failed)
		}
	}
	if len(failed) != 2 || !strings.Contains(out, "  note  tracepoint syscalls:sys_enter_chdir (JIT)") ||
		!strings.Contains(out, "  note  tp_btf tcp_sendmsg_locked (download)") {
		t.Errorf("want exactly the two required tracepoints failed, chdir and TCP's send noted: %v", failed)
	}
	if !strings.Contains(out, "a report here would lack:\n") || !strings.Contains(out, "page-cache misses, hits and disk-read time (tp_btf mm_filemap_get_pages (page cache)): FAIL") {
		t.Errorf("the report does not say what would be lacking")
	}
}

// TestVerificationCheckNotesASlowStart: the verifier's times add up per
// object, and past slowStart the check is a note that says the start is
// slow on this kernel.
func TestVerificationCheckNotesASlowStart(t *testing.T) {
	fast := verificationCheck([]verification{{sensor: "page cache", total: 40 * time.Millisecond, largest: "on_add_to_cache", largestTime: 12 * time.Millisecond},
		{sensor: "scheduler", total: 9 * time.Millisecond, largest: "on_switch", largestTime: 5 * time.Millisecond}})
	if fast.Status != OK || !strings.Contains(fast.Detail, "took 49ms") || !strings.Contains(fast.Detail, "page cache 40ms (on_add_to_cache 12ms)") {
		t.Errorf("fast: %+v", fast)
	}
	slow := verificationCheck([]verification{{sensor: "page cache", total: 168 * time.Millisecond, largest: "on_add_to_cache", largestTime: 52 * time.Millisecond}})
	if slow.Status != Note || !strings.Contains(slow.Detail, "starts slowly") {
		t.Errorf("slow: %+v", slow)
	}
}
