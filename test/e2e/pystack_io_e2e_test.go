package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
)

// readsChain is a stack's frames in the user's files named by suffixes
// (reads.py, readers.py), innermost first, as "base:LINE qualname".
func readsChain(st *record.PyStack) []string {
	var out []string
	if st == nil {
		return nil
	}
	for _, f := range st.Frames {
		if strings.HasSuffix(f.File, "/reads.py") || strings.HasSuffix(f.File, "/readers.py") {
			out = append(out, fmt.Sprintf("%s:%d %s", filepath.Base(f.File), f.Line, f.Func))
		}
	}
	return out
}

// fileByPath is the record's file at path.
func fileByPath(t *testing.T, r *record.Record, path string) *record.File {
	t.Helper()
	for i := range r.Files {
		if r.Files[i].Path == path {
			return &r.Files[i]
		}
	}
	t.Fatalf("no file %s in the record", path)
	return nil
}

// chainOf is the stack charge of f whose user frames are want, or nil.
func chainOf(r *record.Record, f *record.File, want []string) *record.StackCharge {
	for i := range f.Stacks {
		if strings.Join(readsChain(r.StackAt(f.Stacks[i].Stack)), " ← ") == strings.Join(want, " ← ") {
			return &f.Stacks[i]
		}
	}
	return nil
}

func describeStacks(r *record.Record, f *record.File) string {
	var b strings.Builder
	for _, sc := range f.Stacks {
		fmt.Fprintf(&b, "\n  %d ns %d bytes: %q", sc.NS, sc.Bytes, readsChain(r.StackAt(sc.Stack)))
	}
	return b.String()
}

// TestDiskReadsCarryPythonLineInRecordTextAndPprof: under every
// interpreter present, a function at a known line that reads an evicted
// file, and one that faults an evicted mapping, are the stacks the file's
// disk time is charged to: exact in the record, the JSON summary, the
// text's "where in the code" and the pprof profile.
func TestDiskReadsCarryPythonLineInRecordTextAndPprof(t *testing.T) {
	testenv.RequireTracing(t)
	script, err := filepath.Abs("../../testdata/pystack/reads.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	for _, py := range pyInterpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			read := []string{fmt.Sprintf("reads.py:%d read_range", mk["read_range"]),
				fmt.Sprintf("reads.py:%d load_weights", mk["load_weights"]), fmt.Sprintf("reads.py:%d <module>", mk["module_read"])}
			checkReadStack(t, py.path, script, "read", read)
			mapped := []string{fmt.Sprintf("reads.py:%d map_weights", mk["map_weights"]), fmt.Sprintf("reads.py:%d <module>", mk["module_mmap"])}
			checkReadStack(t, py.path, script, "mmap", mapped)
		})
	}
}

func checkReadStack(t *testing.T, python, script, how string, want []string) {
	t.Helper()
	data := e2eutil.EvictableFile(t, 16<<20)
	dir := t.TempDir()
	rec, pp, sum := filepath.Join(dir, "rec.json"), filepath.Join(dir, "p.pb.gz"), filepath.Join(dir, "sum.json")
	r := runCT(t, ctOptions{}, "run", "-q", "-o", rec, "--pprof", pp, "--json", sum, "--", python, script, how, data)
	if r.code != 0 {
		t.Fatalf("%s: exit %d: %s", how, r.code, r.stderr)
	}
	got := readRecord(t, rec)
	f := fileByPath(t, got, data)
	if f.BytesFromDisk == 0 {
		t.Fatalf("%s: %s was not read from disk (evicted before the run?)", how, data)
	}
	sc := chainOf(got, f, want)
	if sc == nil {
		t.Fatalf("%s: no stack %q among the file's stacks:%s", how, want, describeStacks(got, f))
	}
	// Every fill's CPU is the stack's; I/O waits outside a fill (pages
	// another thread reads) are not (TestColdMappingWaitsCarryTheFaultingLine
	// holds the mapping's to 90%).
	total := f.IOWaitNS + f.MissCPUNS + f.FillWaitNS
	if sc.NS*4 < total || sc.MissCPUNS*10 < f.MissCPUNS*9 {
		t.Errorf("%s: the stack carries %d ns (fill CPU %d) of the file's %d ns (fill CPU %d):%s", how, sc.NS, sc.MissCPUNS,
			total, f.MissCPUNS, describeStacks(got, f))
	}
	if f.Stacks[0].Stack != sc.Stack {
		t.Errorf("%s: the file's first stack is not %q:%s", how, want, describeStacks(got, f))
	}
	checkSummaryFileStack(t, sum, data, want)

	text := runCT(t, ctOptions{}, "report", rec)
	site := want[0]
	for _, w := range want[1:] {
		site += " ← :" + strings.TrimPrefix(w, "reads.py:")
	}
	// The section's call sites come first, heaviest first; another one
	// (the import of a library DAMON evicted meanwhile) may outweigh it.
	_, section, _ := strings.Cut(text.stdout, "where in the code: disk reads\n")
	var named bool
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			break // the per-file lists, or the section's end
		}
		named = named || strings.HasPrefix(line, "  "+site+"  ")
	}
	if !named {
		t.Errorf("%s: the report names no call site %q:\n%s", how, site, text.stdout)
	}
	checkPprofChain(t, pp, data, want)
}

// checkSummaryFileStack: the JSON summary's file lists its stacks,
// the first being want, with its part of the file's time.
func checkSummaryFileStack(t *testing.T, path, file string, want []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Files []struct {
			Path   string `json:"path"`
			Stacks []struct {
				Stack    int    `json:"stack"`
				NS       int64  `json:"ns"`
				ThreadNS int64  `json:"thread_ns"`
				Bytes    uint64 `json:"bytes"`
			} `json:"stacks"`
		} `json:"files"`
		Stacks []record.PyStack `json:"stacks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Files {
		if f.Path != file {
			continue
		}
		if len(f.Stacks) == 0 || f.Stacks[0].Stack < 1 || f.Stacks[0].Stack > len(s.Stacks) {
			t.Fatalf("summary: %s has stacks %+v of %d", file, f.Stacks, len(s.Stacks))
		}
		if got := readsChain(&s.Stacks[f.Stacks[0].Stack-1]); strings.Join(got, " ← ") != strings.Join(want, " ← ") {
			t.Errorf("summary: %s's first stack %q, want %q", file, got, want)
		}
		if f.Stacks[0].ThreadNS <= 0 {
			t.Errorf("summary: %s's first stack has no thread time: %+v", file, f.Stacks[0])
		}
		return
	}
	t.Errorf("summary: no file %s", file)
}

// checkPprofChain: a disk-read sample under file has want's frames
// (outermost first, as module.qualname:line) under a python process, and
// `go tool pprof -traces -lines` prints them with their source lines.
func checkPprofChain(t *testing.T, path, file string, want []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Parse(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var chain []string
	for i := len(want) - 1; i >= 0; i-- {
		var line int
		var fn string
		fmt.Sscanf(strings.TrimPrefix(want[i], "reads.py:"), "%d %s", &line, &fn)
		chain = append(chain, fmt.Sprintf("reads.%s:%d", fn, line))
	}
	found := false
	for _, s := range prof.Sample {
		var rootFirst []string
		for i := len(s.Location) - 1; i >= 0; i-- {
			l := s.Location[i].Line[0]
			if l.Function.Name == "" {
				t.Errorf("pprof: a location without a function name")
			}
			if strings.HasPrefix(l.Function.Name, "reads.") {
				rootFirst = append(rootFirst, fmt.Sprintf("%s:%d", l.Function.Name, l.Line))
			} else {
				rootFirst = append(rootFirst, l.Function.Name)
			}
		}
		if len(rootFirst) < 3+len(chain) || rootFirst[0] != "disk reads" || rootFirst[1] != file ||
			!strings.HasPrefix(rootFirst[2], "python") {
			continue
		}
		var py []string
		for _, n := range rootFirst[3:] {
			if strings.HasPrefix(n, "reads.") {
				py = append(py, n)
			}
		}
		if strings.Join(py, ",") == strings.Join(chain, ",") && s.Value[0] > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("pprof: no disk-read sample of %s with %q under a python process", file, chain)
	}
	if _, err := exec.LookPath("go"); err != nil {
		return
	}
	out, err := exec.Command("go", "tool", "pprof", "-traces", "-lines", path).CombinedOutput()
	if err != nil {
		t.Logf("go tool pprof: %v", err)
		return
	}
	leaf := chain[len(chain)-1]
	name, line, _ := strings.Cut(leaf, ":")
	if !strings.Contains(string(out), name+" ") || !strings.Contains(string(out), "reads.py:"+line) {
		t.Errorf("go tool pprof -traces -lines shows no %s at reads.py:%s:\n%s", name, line, out)
	}
}

// firstInterpreter is the first CPython present, or skips.
func firstInterpreter(t *testing.T) pyInterpreter {
	t.Helper()
	var why []string
	for _, py := range pyInterpreters() {
		if py.skip == "" {
			return py
		}
		why = append(why, py.skip)
	}
	t.Skip(strings.Join(why, "; "))
	return pyInterpreter{}
}

// TestThreadsMissingEachOnItsOwnFileGetTheirOwnStacks: 64 Python
// threads, each reading its own evicted file in its own function, charge
// each file to the stack of its own function.
func TestThreadsMissingEachOnItsOwnFileGetTheirOwnStacks(t *testing.T) {
	testenv.RequireTracing(t)
	py := firstInterpreter(t)
	script, err := filepath.Abs("../../testdata/pystack/reads.py")
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	files := make([]string, n)
	for i := range files {
		files[i] = e2eutil.EvictableFile(t, 1<<20)
	}
	work, dir := t.TempDir(), t.TempDir()
	rec := filepath.Join(dir, "rec.json")
	r := runCT(t, ctOptions{}, append([]string{"run", "-q", "-o", rec, "--", py.path, script, "threads", work}, files...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := readRecord(t, rec)
	lines := spawnLines(t, filepath.Join(work, "readers.py"))
	wrong := 0
	for i, path := range files {
		f := fileByPath(t, got, path)
		want := fmt.Sprintf("readers.py:%d reader_%d", lines[fmt.Sprintf("reader_%d", i)], i)
		var chain []string
		if len(f.Stacks) > 0 {
			chain = readsChain(got.StackAt(f.Stacks[0].Stack))
		}
		if len(chain) == 0 || chain[0] != want {
			wrong++
			t.Errorf("file %d: first stack %q, want %q innermost:%s", i, chain, want, describeStacks(got, f))
			continue
		}
		for _, sc := range f.Stacks[1:] {
			if c := readsChain(got.StackAt(sc.Stack)); len(c) > 0 && c[0] != want && sc.NS > f.Stacks[0].NS/10 {
				t.Errorf("file %d: also charged %d ns to another reader's stack %q", i, sc.NS, c)
			}
		}
	}
	t.Logf("%d of %d files charged to their reader's stack", n-wrong, n)
}

// TestTwoCallSitesSplitOneFileByBytes: one function reads the first
// quarter of an evicted file, another the rest; each stack is charged
// its share of the bytes, and both some of the time.
func TestTwoCallSitesSplitOneFileByBytes(t *testing.T) {
	testenv.RequireTracing(t)
	py := firstInterpreter(t)
	script, err := filepath.Abs("../../testdata/pystack/reads.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	data := e2eutil.EvictableFile(t, 32<<20)
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.json")
	r := runCT(t, ctOptions{}, "run", "-q", "-o", rec, "--", py.path, script, "split", data)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := readRecord(t, rec)
	f := fileByPath(t, got, data)
	head := chainOf(got, f, []string{fmt.Sprintf("reads.py:%d read_range", mk["read_range"]),
		fmt.Sprintf("reads.py:%d head_of", mk["head_of"]), fmt.Sprintf("reads.py:%d <module>", mk["module_head"])})
	rest := chainOf(got, f, []string{fmt.Sprintf("reads.py:%d read_range", mk["read_range"]),
		fmt.Sprintf("reads.py:%d rest_of", mk["rest_of"]), fmt.Sprintf("reads.py:%d <module>", mk["module_rest"])})
	if head == nil || rest == nil {
		t.Fatalf("the two call sites are not both among the file's stacks:%s", describeStacks(got, f))
	}
	share := float64(head.Bytes) / float64(head.Bytes+rest.Bytes)
	t.Logf("head_of: %d bytes, %d ns; rest_of: %d bytes, %d ns; head's share of the bytes %.3f",
		head.Bytes, head.NS, rest.Bytes, rest.NS, share)
	if share < 0.17 || share > 0.33 {
		t.Errorf("head_of carries %.0f%% of the bytes, want about 25%%:%s", share*100, describeStacks(got, f))
	}
	if head.NS <= 0 || rest.NS <= 0 {
		t.Errorf("a call site without time: head %d ns, rest %d ns", head.NS, rest.NS)
	}
	if sum := head.Bytes + rest.Bytes; sum < uint64(f.SizeBytes)*9/10 {
		t.Errorf("the two call sites carry %d of the file's %d bytes", sum, f.SizeBytes)
	}
}

// TestDownloadCarriesTheConnectingLine: a function at a known line that
// fetches a file from a loopback server is the stack its download
// carries, in the record and on its connection.
func TestDownloadCarriesTheConnectingLine(t *testing.T) {
	testenv.RequireTracing(t)
	py := firstInterpreter(t)
	script, err := filepath.Abs("../../testdata/pystack/reads.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	body := make([]byte, 8<<20)
	for i := range body {
		body[i] = byte(i * 13)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	dir := t.TempDir()
	rec, dest := filepath.Join(dir, "rec.json"), filepath.Join(dir, "model.bin")
	r := runCT(t, ctOptions{}, "run", "-q", "-o", rec, "--", py.path, script, "fetch", srv.URL+"/model.bin", dest)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := readRecord(t, rec)
	if len(got.Downloads) != 1 {
		t.Fatalf("%d downloads, want 1", len(got.Downloads))
	}
	d := got.Downloads[0]
	want := []string{fmt.Sprintf("reads.py:%d fetch", mk["fetch"]), fmt.Sprintf("reads.py:%d <module>", mk["module_fetch"])}
	if len(d.Stacks) != 1 {
		t.Fatalf("download stacks %+v, want one", d.Stacks)
	}
	if c := readsChain(got.StackAt(d.Stacks[0].Stack)); strings.Join(c, " ← ") != strings.Join(want, " ← ") {
		t.Errorf("download's stack %q, want %q", c, want)
	}
	if d.Stacks[0].Bytes != d.Bytes || d.Stacks[0].NS <= 0 {
		t.Errorf("download's stack carries %d of its %d bytes and %d ns", d.Stacks[0].Bytes, d.Bytes, d.Stacks[0].NS)
	}
	if len(d.Connections) != 1 || d.Connections[0].Stack != d.Stacks[0].Stack {
		t.Errorf("connections %+v do not carry the stack %d", d.Connections, d.Stacks[0].Stack)
	}
	text := runCT(t, ctOptions{}, "report", rec)
	site := want[0] + " ← :" + strings.TrimPrefix(want[1], "reads.py:")
	if !strings.Contains(text.stdout, "where in the code: downloads\n  "+site+"  ") {
		t.Errorf("the report names no download call site %q:\n%s", site, text.stdout)
	}
}

// TestDiskReadStacksInPidNamespaceAndForkChild: the read's stack is exact
// in a process inside its own pid namespace (its threads matched by their
// namespace tid) and in a multiprocessing fork child.
func TestDiskReadStacksInPidNamespaceAndForkChild(t *testing.T) {
	testenv.RequireTracing(t)
	py := firstInterpreter(t)
	script, err := filepath.Abs("../../testdata/pystack/reads.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	read := []string{fmt.Sprintf("reads.py:%d read_range", mk["read_range"]),
		fmt.Sprintf("reads.py:%d load_weights", mk["load_weights"])}
	t.Run("unshare", func(t *testing.T) {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("no unshare on PATH")
		}
		checkRecordedStack(t, []string{unshare, "--pid", "--fork", py.path, script, "read"},
			append(read, fmt.Sprintf("reads.py:%d <module>", mk["module_read"])))
	})
	t.Run("fork", func(t *testing.T) {
		checkRecordedStack(t, []string{py.path, script, "fork"},
			append(read, fmt.Sprintf("reads.py:%d child_read", mk["child_read"]), fmt.Sprintf("reads.py:%d <module>", mk["module_fork"])))
	})
}

// checkRecordedStack runs argv with an evicted file's path appended and
// finds want as the file's first stack in the record.
func checkRecordedStack(t *testing.T, argv, want []string) {
	t.Helper()
	data := e2eutil.EvictableFile(t, 16<<20)
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runCT(t, ctOptions{}, append(append([]string{"run", "-q", "-o", rec, "--"}, argv...), data)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := readRecord(t, rec)
	f := fileByPath(t, got, data)
	if len(f.Stacks) == 0 || chainOf(got, f, want) == nil || f.Stacks[0].Stack != chainOf(got, f, want).Stack {
		t.Errorf("the file's first stack is not %q:%s", want, describeStacks(got, f))
	}
}

// TestCheckpointCarriesFileStacks: a checkpoint written while the command
// still runs names the stack its read was charged to, as the final record
// does.
func TestCheckpointCarriesFileStacks(t *testing.T) {
	testenv.RequireTracing(t)
	py := firstInterpreter(t)
	script, err := filepath.Abs("../../testdata/pystack/reads.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	data := e2eutil.EvictableFile(t, 16<<20)
	out := filepath.Join(t.TempDir(), "run.rec")
	cmd := exec.Command(ctBin, "run", "-q", "--checkpoint", "1s", "-o", out, "--", py.path, script, "read", data, "4")
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	var rec *record.Record
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		r, err := record.ReadFile(out + ".partial")
		if err == nil && r.Partial != nil && r.Partial.AtNS > 1.9e9 {
			rec = r
			break
		}
	}
	if rec == nil {
		t.Fatal("no checkpoint 2 s into the run within 6 s")
	}
	want := []string{fmt.Sprintf("reads.py:%d read_range", mk["read_range"]),
		fmt.Sprintf("reads.py:%d load_weights", mk["load_weights"]), fmt.Sprintf("reads.py:%d <module>", mk["module_read"])}
	f := fileByPath(t, rec, data)
	if sc := chainOf(rec, f, want); sc == nil || sc.NS <= 0 {
		t.Errorf("the checkpoint's file has no stack %q:%s", want, describeStacks(rec, f))
	}
}

// TestColdMappingWaitsCarryTheFaultingLine: a function at a known line
// faulting an evicted 128 MiB mapping page by page carries at least 90%
// of the file's fill CPU and waits. Fault-around maps only the pages
// already read in; the fault that follows on a page its own readahead
// still has in flight waits for it after the fill that inserted it has
// closed, and that wait is the faulting line's too.
func TestColdMappingWaitsCarryTheFaultingLine(t *testing.T) {
	testenv.RequireTracing(t)
	py := firstInterpreter(t)
	script, err := filepath.Abs("../../testdata/pystack/reads.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	want := []string{fmt.Sprintf("reads.py:%d map_weights", mk["map_weights"]), fmt.Sprintf("reads.py:%d <module>", mk["module_mmap"])}
	data := e2eutil.EvictableFile(t, 128<<20)
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runCT(t, ctOptions{}, "run", "-q", "-o", rec, "--", py.path, script, "mmap", data)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := readRecord(t, rec)
	f := fileByPath(t, got, data)
	if f.BytesFromDisk < 64<<20 {
		t.Fatalf("%s: %d bytes from disk of 128 MiB (evicted before the run?)", data, f.BytesFromDisk)
	}
	sc := chainOf(got, f, want)
	if sc == nil {
		t.Fatalf("no stack %q among the file's stacks:%s", want, describeStacks(got, f))
	}
	total := f.IOWaitNS + f.MissCPUNS + f.FillWaitNS
	t.Logf("the faulting line carries %d of %d ns (I/O wait %d of %d)", sc.NS, total, sc.IOWaitNS, f.IOWaitNS)
	if sc.NS*10 < total*9 {
		t.Errorf("the faulting line carries %d ns of the file's %d ns (I/O wait %d of %d):%s", sc.NS, total,
			sc.IOWaitNS, f.IOWaitNS, describeStacks(got, f))
	}
}

// TestTimelineSlicesNameTheirPhaseLine: a file read from one function,
// then half a second later from another, gives I/O slices that name the
// first function's line and then the second's, in the final record's
// timeline and in a checkpoint's.
func TestTimelineSlicesNameTheirPhaseLine(t *testing.T) {
	testenv.RequireTracing(t)
	py := firstInterpreter(t)
	script, err := filepath.Abs("../../testdata/pystack/reads.py")
	if err != nil {
		t.Fatal(err)
	}
	mk := spawnLines(t, script)
	head := fmt.Sprintf(":%d head_of", mk["head_of"])
	rest := fmt.Sprintf(":%d rest_of", mk["rest_of"])
	data := e2eutil.EvictableFile(t, 64<<20)
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.json")
	cmd := exec.Command(ctBin, "run", "-q", "--checkpoint", "1s", "-o", rec, "--", py.path, script, "phases", data, "2")
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A checkpoint past the second phase (which ends within about 1.5 s
	// of the start), while the script sleeps.
	partial := filepath.Join(dir, "partial.json")
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		r, err := record.ReadFile(rec + ".partial")
		if err == nil && r.Partial != nil && r.Partial.AtNS > 2.5e9 {
			b, err := os.ReadFile(rec + ".partial")
			if err == nil && os.WriteFile(partial, b, 0o644) == nil {
				break
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, path := range []string{rec, partial} {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("no %s: %v", filepath.Base(path), err)
			continue
		}
		checkPhaseSlices(t, path, filepath.Base(data), head, rest)
	}
}

// checkPhaseSlices: the timeline of the record at path has I/O slices of
// file (by base name) naming head's line, then rest's, never head's
// after rest's.
func checkPhaseSlices(t *testing.T, path, file, head, rest string) {
	t.Helper()
	r := runCT(t, ctOptions{}, "report", "--timeline", "-", path)
	if r.code != 0 {
		t.Fatalf("report --timeline %s: exit %d: %s", path, r.code, r.stderr)
	}
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			TS   float64        `json:"ts"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &tr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var seq []string
	for _, e := range tr.TraceEvents {
		if !strings.HasPrefix(e.Name, "I/O wait "+file) && !strings.HasPrefix(e.Name, "page-cache fill "+file) {
			continue
		}
		site, _ := e.Args["stack"].(string)
		switch {
		case strings.Contains(site, head):
			seq = append(seq, "head")
		case strings.Contains(site, rest):
			seq = append(seq, "rest")
		default:
			seq = append(seq, "other:"+site)
		}
	}
	got := strings.Join(seq, " ")
	t.Logf("%s: the file's slices name %s", filepath.Base(path), got)
	if !strings.HasPrefix(got, "head") || !strings.HasSuffix(got, "rest") || strings.Contains(got, "rest head") ||
		strings.Contains(got, "other") {
		t.Errorf("%s: the file's slices name %q, want head_of's line (%s) then rest_of's (%s)", filepath.Base(path), got, head, rest)
	}
}

// TestSiblingImportsCarryTheirOwnLines: single-file modules imported one
// after the other by one module read their source through the same
// importlib frames at the same addresses, each with its own loader; under
// every interpreter present each evicted module is charged to the line
// that imported it, not to the first import's.
func TestSiblingImportsCarryTheirOwnLines(t *testing.T) {
	testenv.RequireTracing(t)
	for _, py := range pyInterpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			dir := e2eutil.DiskDir(t)
			const n = 6
			mods := evictedModules(t, dir, "sib", n)
			// Time first for coldtrace to locate the interpreter.
			main := "import sys, time\ntime.sleep(0.6)\nsys.path.insert(0, sys.argv[1])\n"
			for i := range mods {
				main += fmt.Sprintf("import sib_%d\n", i) // line 4 + i
			}
			// Time for the last import's stack to be read while it lives.
			main += "time.sleep(0.6)\n"
			importSites(t, py, dir, "sibs.py", main, mods, func(i int) int { return 4 + i })
		})
	}
}

// TestLoopImportsReuseTheLoopsStack: modules imported in a loop from one
// line read their source through the same frames at the same addresses
// and instructions, each with its own loader: after the first, each is
// charged to the loop's line by the check of every frame's code and
// instruction, without a walk; a loop that alternates between two lines
// at the same depth is told apart by that check, each module charged to
// its own line.
func TestLoopImportsReuseTheLoopsStack(t *testing.T) {
	testenv.RequireTracing(t)
	for _, py := range pyInterpreters() {
		t.Run(py.name, func(t *testing.T) {
			if py.skip != "" {
				t.Skip(py.skip)
			}
			dir := e2eutil.DiskDir(t)
			const n = 24
			mods := evictedModules(t, dir, "loop", 2*n)
			// Line 5: the loop of one line; lines 8 and 10: the loop
			// that alternates.
			main := "import importlib, sys, time\n" +
				"time.sleep(0.6)\n" +
				"sys.path.insert(0, sys.argv[1])\n" +
				fmt.Sprintf("for i in range(%d):\n", n) +
				"    importlib.import_module('loop_%d' % i)\n" +
				fmt.Sprintf("for i in range(%d, %d):\n", n, 2*n) +
				"    if i % 2 == 0:\n" +
				"        importlib.import_module('loop_%d' % i)\n" +
				"    else:\n" +
				"        importlib.import_module('loop_%d' % i)\n" +
				"time.sleep(0.6)\n"
			got := importSites(t, py, dir, "loops.py", main, mods, func(i int) int {
				if i < n {
					return 5
				}
				return 8 + 2*(i%2)
			})
			// The first loop's modules after its first are taken
			// again without a walk.
			t.Logf("%d walks, %d reuses", got.Self.PyWalks, got.Self.PyReuses)
			if got.Self.PyReuses < n-1 {
				t.Errorf("%d stacks reused, want at least %d (the one-line loop's imports after its first)", got.Self.PyReuses, n-1)
			}
		})
	}
}

// evictedModules writes n single-line modules PREFIX_I.py into dir and
// evicts them.
func evictedModules(t *testing.T, dir, prefix string, n int) []string {
	t.Helper()
	mods := make([]string, n)
	for i := range mods {
		mods[i] = filepath.Join(dir, fmt.Sprintf("%s_%d.py", prefix, i))
		if err := os.WriteFile(mods[i], []byte(fmt.Sprintf("X = %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		syncFile(t, mods[i])
		e2eutil.Evict(t, mods[i])
	}
	return mods
}

// importSites traces script name (text main, run with dir as its
// argument and no bytecode written) under py and checks that every
// module of mods was read from disk and charged to the script's line
// line(i) as its innermost frame there; it returns the record.
func importSites(t *testing.T, py pyInterpreter, dir, name, main string, mods []string, line func(i int) int) *record.Record {
	t.Helper()
	script := filepath.Join(dir, name)
	if err := os.WriteFile(script, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runCT(t, ctOptions{}, "run", "-q", "-o", rec, "--", py.path, "-B", script, dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := readRecord(t, rec)
	for i, m := range mods {
		f := fileByPath(t, got, m)
		if f.BytesFromDisk == 0 {
			t.Errorf("%s was not read from disk (evicted before the run?)", m)
			continue
		}
		want := fmt.Sprintf("%s:%d <module>", name, line(i))
		var site string
		if len(f.Stacks) > 0 {
			site = innermostIn(got.StackAt(f.Stacks[0].Stack), "/"+name)
		}
		if site != want {
			t.Errorf("%s charged to %q, want %q", filepath.Base(m), site, want)
		}
	}
	return got
}

// innermostIn is stack st's innermost frame in a file named by suffix,
// as "base:LINE qualname", or "".
func innermostIn(st *record.PyStack, suffix string) string {
	if st == nil {
		return ""
	}
	for _, f := range st.Frames {
		if strings.HasSuffix(f.File, suffix) {
			return fmt.Sprintf("%s:%d %s", filepath.Base(f.File), f.Line, f.Func)
		}
	}
	return ""
}

// syncFile writes path's pages to disk, so that they can be evicted.
func syncFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
