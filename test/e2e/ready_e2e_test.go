package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/attribution/advice"
)

// readyWorkload is a Python "server" that marks ready, then serves three
// requests (each a mark), running cc on a tiny C file during the
// requests listed in compileIn ("0" is before ready).
func readyWorkload(t *testing.T, compileIn ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"0", "1", "3"} {
		src := "int f" + n + "(int x) { return x * " + n + " + 1; }\n"
		if err := os.WriteFile(filepath.Join(dir, "k"+n+".c"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var compile []string
	for _, n := range compileIn {
		compile = append(compile, `"`+n+`"`)
	}
	return `import os, socket, subprocess, time
d = ` + "'" + dir + "'" + `
compile = [` + strings.Join(compile, ", ") + `]
def mark(label):
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(label.encode(), os.environ["COLDTRACE_MARK"])
    time.sleep(0.05)
def serve(n):
    if n in compile:
        subprocess.run(["cc", "-c", "-o", os.path.join(d, "k" + n + ".o"), os.path.join(d, "k" + n + ".c")], check=True)
    time.sleep(0.1)
serve("0")
mark("ready")
serve("1")
mark("request 2")
serve("2")
mark("request 3")
serve("3")
`
}

// readySummary runs the workload under coldtrace run and returns its
// JSON summary's compiles after ready and the text report.
func readySummary(t *testing.T, script string, extra ...string) (*advice.LateCompiles, string) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "run.json")
	args := append([]string{"run", "--json", js}, extra...)
	code, _, stderr := coldtrace(t, nil, append(args, "--", "/usr/bin/python3", "-c", script)...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Late *advice.LateCompiles `json:"compiles_after_ready"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	return sum.Late, stderr
}

// TestCompilesAfterReadyNameTheirSegments: cc runs during requests 1 and
// 3 after the "ready" mark; the finding names segments 1 and 3 with one
// compile each, in the JSON, the report's finding and its next steps.
func TestCompilesAfterReadyNameTheirSegments(t *testing.T) {
	requireTracing(t)
	late, report := readySummary(t, readyWorkload(t, "0", "1", "3"))
	if late == nil {
		t.Fatalf("no compiles after ready; report:\n%s", report)
	}
	if late.ReadyBy != `mark "ready"` || late.Compiles != 2 || len(late.Segments) != 2 {
		t.Fatalf("compiles after ready = %+v", late)
	}
	for i, want := range []struct {
		index int
		label string
	}{{1, "ready"}, {3, "request 3"}} {
		s := late.Segments[i]
		if s.Index != want.index || s.Label != want.label || s.Compiles != 1 || s.Sources[0] != "cc" || s.CompileNS <= 0 {
			t.Errorf("segment %d = %+v, want index %d %q with one cc", i, s, want.index, want.label)
		}
	}
	for _, want := range []string{`finding: 2 compiles after ready (mark "ready"`, `1 during segment 1 "ready" (cc: `,
		`1 during segment 3 "request 3" (cc: `, "compile before ready: warm the kernels up"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestCompilesBeforeReadyAreNotAFinding: the same server compiling only
// before its ready mark gets no finding.
func TestCompilesBeforeReadyAreNotAFinding(t *testing.T) {
	requireTracing(t)
	late, report := readySummary(t, readyWorkload(t, "0"))
	if late != nil || strings.Contains(report, "after ready") {
		t.Fatalf("compiles after ready = %+v; report:\n%s", late, report)
	}
}

// TestReadyFlagPicksTheNamedMark: --ready "request 3" moves the ready
// point, so only the compile of request 3 is late.
func TestReadyFlagPicksTheNamedMark(t *testing.T) {
	requireTracing(t)
	late, report := readySummary(t, readyWorkload(t, "1", "3"), "--ready", "request 3")
	if late == nil || late.ReadyBy != `mark "request 3"` || late.Compiles != 1 || len(late.Segments) != 1 || late.Segments[0].Index != 3 {
		t.Fatalf("compiles after ready = %+v; report:\n%s", late, report)
	}
}

// TestDiffSaysWhichRunCompiledAfterReady: diff of a run compiling only
// before ready (A) and one compiling during requests 1 and 3 (B) has
// B's compiles after ready and none for A.
func TestDiffSaysWhichRunCompiledAfterReady(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	recA, recB := filepath.Join(dir, "a.rec"), filepath.Join(dir, "b.rec")
	readySummary(t, readyWorkload(t, "0"), "-o", recA)
	readySummary(t, readyWorkload(t, "1", "3"), "-o", recB)
	code, out, stderr := coldtrace(t, nil, "diff", "--json", recA, recB)
	if code != 0 {
		t.Fatalf("diff: exit %d\n%s", code, stderr)
	}
	var d struct {
		LateA *advice.LateCompiles `json:"compiles_after_ready_a"`
		LateB *advice.LateCompiles `json:"compiles_after_ready_b"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.LateA != nil || d.LateB == nil || d.LateB.Compiles != 2 || len(d.LateB.Segments) != 2 {
		t.Fatalf("diff: A %+v, B %+v", d.LateA, d.LateB)
	}
	code, out, _ = coldtrace(t, nil, "diff", recA, recB)
	if code != 0 || !strings.Contains(out, `compiles after ready in B: 2 compiles after ready (mark "ready"`) || strings.Contains(out, "in A:") {
		t.Errorf("diff text:\n%s", out)
	}
}

// TestAttachedServerCompilingOnRequestsOneAndThree: coldtrace attach to
// the test server, marked "ready" then "request 2" and "request 3" from
// outside, the server compiling with cc on requests 1 and 3: the
// finding names segments 1 and 3.
func TestAttachedServerCompilingOnRequestsOneAndThree(t *testing.T) {
	requireTracing(t)
	srv, port := startPyServer(t, "/dev/null")
	rec := filepath.Join(t.TempDir(), "attach.rec")
	a := startAttach(t, "--pid", strconv.Itoa(srv.Process.Pid), "-o", rec)
	for i, step := range []struct{ mark, path string }{{"ready", "/cc"}, {"request 2", "/burst"}, {"request 3", "/cc"}} {
		if code, _, stderr := coldtrace(t, nil, "mark", "--pid", strconv.Itoa(srv.Process.Pid), step.mark); code != 0 {
			t.Fatalf("mark %d: %d %s", i, code, stderr)
		}
		time.Sleep(100 * time.Millisecond)
		get(t, port, step.path)
		time.Sleep(100 * time.Millisecond)
	}
	a.stop(t)
	late := advice.AfterReady(readRecord(t, rec))
	if late == nil || late.ReadyBy != `mark "ready"` || len(late.Segments) != 2 ||
		late.Segments[0].Index != 1 || late.Segments[1].Index != 3 || late.Segments[0].Sources[0] != "cc" || late.Segments[1].Sources[0] != "cc" {
		t.Fatalf("compiles after ready = %+v", late)
	}
}
