package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/internal/testuser"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/residency/coldrun"
)

// coldSummary is the part of the JSON summary the --cold tests read.
type coldSummary struct {
	summaryJSON
	Caches []struct {
		Name           string `json:"name"`
		Root           string `json:"root"`
		Lookups        uint64 `json:"lookups"`
		Hits           uint64 `json:"hits"`
		Misses         uint64 `json:"misses"`
		EntriesWritten uint64 `json:"entries_written"`
		CompileNS      int64  `json:"compile_ns"`
	} `json:"caches"`
	Compilers []struct {
		Name string `json:"name"`
		Runs int    `json:"runs"`
	} `json:"compilers"`
	MadeCold *record.MadeCold `json:"made_cold"`
}

func readColdSummary(t *testing.T, path string) coldSummary {
	t.Helper()
	readSummary(t, path) // checks the schema
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s coldSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// cacheCounts are one cache's lookups as a run saw them.
type cacheCounts struct {
	root                  string
	hits, misses, written uint64
	compileNS             int64
	found                 bool
}

// cache returns the counts of the cache named name whose root is under
// (or is) root; root "" takes the first of that name.
func (s coldSummary) cache(name, root string) cacheCounts {
	for _, c := range s.Caches {
		if c.Name == name && (root == "" || c.Root == root || strings.HasPrefix(c.Root, root+"/")) {
			return cacheCounts{c.Root, c.Hits, c.Misses, c.EntriesWritten, c.CompileNS, true}
		}
	}
	return cacheCounts{}
}

func (s coldSummary) compilerRuns(name string) int {
	for _, c := range s.Compilers {
		if c.Name == name {
			return c.Runs
		}
	}
	return 0
}

// treeHash hashes everything about a directory tree a run could change:
// each entry's path, type and permissions, its modification time (a
// directory's changes when an entry is created or removed in it, even
// one removed again), a file's contents and a link's target.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	entries := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%v\x00%d\x00", rel, fi.Mode(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Write([]byte(target))
		}
		entries++
		return nil
	})
	if err != nil {
		t.Fatalf("hash %s: %v", root, err)
	}
	if entries < 2 {
		t.Fatalf("%s holds nothing: the test's real cache was not filled", root)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkMadeCold checks the record's account of what --cold did, and that
// the fresh directories are gone after the run.
func checkMadeCold(t *testing.T, m *record.MadeCold, classes string, env string) {
	t.Helper()
	if m == nil {
		t.Fatal("the summary of a --cold run has no made_cold")
	}
	if got := strings.Join(m.Classes, ","); got != classes {
		t.Errorf("made_cold classes %q, want %q", got, classes)
	}
	found := false
	for _, d := range m.CacheDirs {
		if d.Env == "HF_HOME" {
			t.Errorf("--cold moved HF_HOME: %+v", d)
		}
		if d.Env == env {
			found = true
		}
		if _, err := os.Stat(d.Dir); !os.IsNotExist(err) {
			t.Errorf("the fresh cache %s is still there after the run (%v)", d.Dir, err)
		}
	}
	if !found {
		t.Errorf("made_cold cache_dirs do not set %s: %+v", env, m.CacheDirs)
	}
}

func demoScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "demo", "main.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return p
}

// TestRunColdDemo: --cold of the Triton-like demo evicts its model and
// gives it an empty kernel cache: the model comes from disk and the
// kernel misses and compiles exactly as on an empty cache, while the
// user's real cache stays byte for byte as it was; the next plain run
// finds that cache and is warm. diff says which run was made cold.
func TestRunColdDemo(t *testing.T) {
	requireTracing(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("the demo compiles its kernel with cc")
	}
	t.Setenv("SUDO_UID", "")
	py, demo := python3(t), demoScript(t)
	dir := e2eutil.DiskDir(t)
	model := filepath.Join(dir, "model.bin")
	const modelSize = 32 * mib
	writeModel(t, model, modelSize)
	real, empty := filepath.Join(dir, "triton"), filepath.Join(dir, "empty-triton")
	out := func(name string) string { return filepath.Join(dir, name) }

	// The user's cache, filled by a first run.
	if code, stdout, stderr := coldtrace(t, []string{"TRITON_CACHE_DIR=" + real}, "-q", "--", py, demo, model); code != 0 || !strings.Contains(stdout, "cache miss") {
		t.Fatalf("first run: exit %d, %q\n%s", code, stdout, stderr)
	}
	before := treeHash(t, real)

	// What an empty cache looks like: the reference for the cold run.
	e2eutil.Evict(t, model)
	if code, stdout, stderr := coldtrace(t, []string{"TRITON_CACHE_DIR=" + empty}, "-q", "--json", out("empty.json"), "--", py, demo, model); code != 0 || !strings.Contains(stdout, "cache miss") {
		t.Fatalf("run on an empty cache: exit %d, %q\n%s", code, stdout, stderr)
	}
	ref := readColdSummary(t, out("empty.json"))
	refTriton := ref.cache("triton", empty)
	if !refTriton.found || refTriton.misses == 0 || refTriton.compileNS <= 0 {
		t.Fatalf("the empty-cache run shows no Triton miss: %+v", ref.Caches)
	}

	// The cold run, with the model in the page cache and the user's cache
	// full: both must look as if they were not.
	e2eutil.WarmUp(t, model)
	code, stdout, stderr := coldtrace(t, []string{"TRITON_CACHE_DIR=" + real}, "--cold", "--evict", model,
		"-o", out("cold.ctrace"), "--json", out("cold.json"), "--", py, demo, model)
	if code != 0 {
		t.Fatalf("--cold run: exit %d\n%s", code, stderr)
	}
	t.Logf("--cold run:\n%s%s", stdout, stderr)
	if !strings.Contains(stdout, "cache miss") {
		t.Errorf("the demo found its kernel in the cache under --cold: %q", stdout)
	}
	if !strings.Contains(stderr, "made cold on purpose (--cold=page-cache,jit): 1 file evicted") {
		t.Errorf("the text report does not say the run was made cold:\n%s", stderr)
	}
	cold := readColdSummary(t, out("cold.json"))
	checkMadeCold(t, cold.MadeCold, "page-cache,jit", "TRITON_CACHE_DIR")
	if m := cold.MadeCold; m.EvictedFiles != 1 || m.EvictedBytes < modelSize*9/10 || len(m.EvictProblems) > 0 {
		t.Errorf("eviction: %d files, %d bytes, problems %q; want 1 file, about %d bytes", m.EvictedFiles, m.EvictedBytes, m.EvictProblems, modelSize)
	}
	var triton string
	for _, d := range cold.MadeCold.CacheDirs {
		if d.Env == "TRITON_CACHE_DIR" {
			triton = d.Dir
		}
	}
	got := cold.cache("triton", triton)
	if !got.found || got.hits != 0 || got.misses != refTriton.misses || got.written != refTriton.written || got.compileNS <= 0 {
		t.Errorf("cold Triton cache %+v, want %d misses and %d entries written as on an empty cache (%+v), no hits",
			got, refTriton.misses, refTriton.written, refTriton)
	}
	t.Logf("Triton: empty cache %d misses, %d written, compile %v, cc %d runs; --cold %d misses, %d written, compile %v, cc %d runs; evicted %d bytes",
		refTriton.misses, refTriton.written, time.Duration(refTriton.compileNS), ref.compilerRuns("cc"),
		got.misses, got.written, time.Duration(got.compileNS), cold.compilerRuns("cc"), cold.MadeCold.EvictedBytes)
	if r, want := cold.compilerRuns("cc"), ref.compilerRuns("cc"); r != want || r == 0 {
		t.Errorf("cc ran %d times under --cold, %d times on an empty cache", r, want)
	}
	if _, missed, _ := fileEntry(t, cold.summaryJSON, model); missed < modelSize/4096*9/10 {
		t.Errorf("the model missed %d pages under --cold, want about %d", missed, modelSize/4096)
	}
	if after := treeHash(t, real); after != before {
		t.Errorf("--cold changed the user's real cache %s", real)
	}
	rec, err := record.ReadFile(out("cold.ctrace"))
	if err != nil || rec.MadeCold == nil || rec.MadeCold.EvictedFiles != 1 {
		t.Errorf("the record does not say it was made cold: %v %+v", err, rec)
	}

	// status --from the cold record looks at the user's cache, not at
	// the fresh one the cold run used (removed, and used by no later run).
	for _, c := range runStatusJSON(t, "--from", out("cold.ctrace")).Caches {
		if coldrun.InFreshCaches(rec.MadeCold, c.Root) {
			t.Errorf("status --from a --cold record surveys its fresh cache %s", c.Root)
		}
	}

	// The next plain run is warm: the user's cache was kept.
	code, stdout, stderr = coldtrace(t, []string{"TRITON_CACHE_DIR=" + real}, "-q", "-o", out("warm.ctrace"), "--json", out("warm.json"), "--", py, demo, model)
	if code != 0 || !strings.Contains(stdout, "cache hit") {
		t.Fatalf("plain run after --cold: exit %d, %q\n%s", code, stdout, stderr)
	}
	warm := readColdSummary(t, out("warm.json"))
	t.Logf("plain run after --cold: Triton %+v, cc %d runs", warm.cache("triton", real), warm.compilerRuns("cc"))
	if w := warm.cache("triton", real); !w.found || w.hits == 0 || w.misses != 0 || warm.compilerRuns("cc") != 0 || warm.MadeCold != nil {
		t.Errorf("plain run after --cold: Triton %+v, cc runs %d, made_cold %+v; want hits only", w, warm.compilerRuns("cc"), warm.MadeCold)
	}

	code, stdout, stderr = coldtrace(t, nil, "diff", out("cold.ctrace"), out("warm.ctrace"))
	if code != 0 || !strings.Contains(stdout, "made cold on purpose (--cold=page-cache,jit)") {
		t.Errorf("diff does not say A was made cold: exit %d\n%s%s", code, stdout, stderr)
	}
}

const numbaProgram = `from numba import njit

@njit(cache=True)
def total(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

print(total(1000))
`

// TestRunColdNumba: --cold=jit of a real Numba cache=True program run as
// the user who ran sudo. Its compile cache lives next to the program
// (__pycache__), where --cold cannot and must not touch it: NUMBA_CACHE_DIR
// takes precedence, and the run misses and compiles as with an empty one.
// The fresh directory is the user's, and so are the files the compile
// wrote; the program's own cache is unchanged and the next run is warm.
func TestRunColdNumba(t *testing.T) {
	requireTracing(t)
	testenv.RequireRoot(t)
	const py = "/usr/bin/python3" // Debian's python3-numba is for the system python
	if err := exec.Command(py, "-c", "import numba").Run(); err != nil {
		t.Skipf("no numba for %s (apt-get install python3-numba): %v", py, err)
	}
	u := testuser.Create(t)
	sudo := []string{"SUDO_UID=" + fmt.Sprint(u.UID), "SUDO_GID=" + fmt.Sprint(u.GID), "SUDO_USER=" + u.Name, "NUMBA_CACHE_DIR="}
	// A directory the user can reach (t.TempDir's parent is root's 0700).
	dir, err := os.MkdirTemp("/var/tmp", "coldtrace-numba-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "prog")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(src, "numba_cached.py")
	if err := os.WriteFile(prog, []byte(numbaProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty-numba")
	for _, p := range []string{src, dir} {
		if err := os.Chown(p, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	out := func(name string) string { return filepath.Join(dir, name) }
	run := func(extraEnv []string, args ...string) (string, string) {
		t.Helper()
		code, stdout, stderr := coldtrace(t, append(append([]string(nil), sudo...), extraEnv...), args...)
		if code != 0 || !strings.Contains(stdout, "332833500") {
			t.Fatalf("%q: exit %d, %q\n%s", args, code, stdout, stderr)
		}
		return stdout, stderr
	}

	// The program's own cache, filled by a first run.
	run(nil, "-q", "--", py, prog)
	real := filepath.Join(src, "__pycache__")
	before := treeHash(t, real)

	run([]string{"NUMBA_CACHE_DIR=" + empty}, "-q", "--json", out("empty.json"), "--", py, prog)
	ref := readColdSummary(t, out("empty.json")).cache("numba", empty)
	if !ref.found || ref.misses == 0 || ref.written == 0 || ref.compileNS <= 0 {
		t.Fatalf("the empty-cache run shows no Numba miss: %+v", ref)
	}

	start := time.Now()
	_, stderr := run(nil, "--cold=jit", "--keep-cold-caches", "--json", out("cold.json"), "--", py, prog)
	t.Logf("--cold=jit run (%v):\n%s", time.Since(start), stderr)
	cold := readColdSummary(t, out("cold.json"))
	m := cold.MadeCold
	if m == nil || strings.Join(m.Classes, ",") != "jit" || m.EvictedFiles != 0 || !m.KeptDirs {
		t.Fatalf("made_cold %+v", m)
	}
	var numbaDir string
	for _, d := range m.CacheDirs {
		if d.Env == "NUMBA_CACHE_DIR" {
			numbaDir = d.Dir
		}
	}
	if numbaDir == "" {
		t.Fatalf("--cold did not move NUMBA_CACHE_DIR: %+v", m.CacheDirs)
	}
	root := filepath.Dir(numbaDir)
	t.Cleanup(func() { os.RemoveAll(root) })
	got := cold.cache("numba", numbaDir)
	t.Logf("Numba: empty cache %d misses, %d written, compile %v; --cold %d misses, %d written, compile %v",
		ref.misses, ref.written, time.Duration(ref.compileNS), got.misses, got.written, time.Duration(got.compileNS))
	if !got.found || got.hits != 0 || got.misses != ref.misses || got.written != ref.written || got.compileNS <= 0 {
		t.Errorf("cold Numba cache %+v, want %d misses and %d entries written as on an empty cache, no hits", got, ref.misses, ref.written)
	}
	// Kept (--keep-cold-caches): the compile's files are there, all the
	// user's.
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if own := int(fi.Sys().(*syscall.Stat_t).Uid); own != u.UID {
			t.Errorf("%s is owned by uid %d, not the user's %d", p, own, u.UID)
		}
		if d.Type().IsRegular() {
			files++
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Errorf("kept cold caches %s: %d files, %v", root, files, err)
	}
	if after := treeHash(t, real); after != before {
		t.Errorf("--cold changed the program's own Numba cache %s", real)
	}

	run(nil, "-q", "--json", out("warm.json"), "--", py, prog)
	t.Logf("plain run after --cold: Numba %+v", readColdSummary(t, out("warm.json")).cache("numba", ""))
	if w := readColdSummary(t, out("warm.json")).cache("numba", ""); !w.found || w.hits == 0 || w.misses != 0 {
		t.Errorf("plain run after --cold: Numba %+v, want hits only", w)
	}
}

// TestRunColdRecordOfAnotherHost: --from a record made elsewhere is
// warned about, then used: its files are evicted here.
func TestRunColdRecordOfAnotherHost(t *testing.T) {
	requireTracing(t)
	t.Setenv("SUDO_UID", "")
	dir := e2eutil.DiskDir(t)
	model := filepath.Join(dir, "model.bin")
	writeModel(t, model, 8*mib)
	rec := writeRecord(t, dir, model, filepath.Join(dir, "triton"), "elsewhere.example")
	e2eutil.WarmUp(t, model)
	code, _, stderr := coldtrace(t, nil, "--cold=page-cache", "--from", rec, "--evict", filepath.Join(dir, "missing.bin"),
		"--json", filepath.Join(dir, "s.json"), "--", "true")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "was recorded on elsewhere.example, not on this host") {
		t.Errorf("no warning about the other host:\n%s", stderr)
	}
	if !strings.Contains(stderr, "missing.bin: no such file or directory") {
		t.Errorf("no line for the missing path:\n%s", stderr)
	}
	m := readColdSummary(t, filepath.Join(dir, "s.json")).MadeCold
	if m == nil || m.EvictedFiles != 1 || m.EvictedBytes < 8*mib*9/10 || len(m.EvictProblems) != 1 || len(m.CacheDirs) != 0 {
		t.Errorf("made_cold %+v: want the record's file evicted, the missing one a problem, no cache moved", m)
	}
	if n := e2eutil.ResidentPages(t, model); n > 8*mib/4096/10 {
		t.Errorf("%d pages of the record's file still cached", n)
	}
}

// TestRunColdEnvironment: what the command sees under --cold with every
// class: each variable points at an empty directory of its own under one
// fresh root, a variable the user had set is replaced (not duplicated),
// and HF_HOME, which holds the login token, is left as it was.
func TestRunColdEnvironment(t *testing.T) {
	requireTracing(t)
	t.Setenv("SUDO_UID", "")
	dir := t.TempDir()
	script := `for v in TRITON_CACHE_DIR NUMBA_CACHE_DIR PYTHONPYCACHEPREFIX HF_HUB_CACHE TORCH_HOME HF_HOME; do
  eval d=\$$v; n=$(ls -A "$d" 2>/dev/null | wc -l); echo "$v=$d $n"; done
env | grep -c '^TRITON_CACHE_DIR='`
	code, stdout, stderr := coldtrace(t, []string{"TRITON_CACHE_DIR=" + dir, "HF_HOME=" + dir + "/hf"},
		"-q", "--cold=jit,pycache,downloads", "--json", filepath.Join(dir, "s.json"), "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	m := readColdSummary(t, filepath.Join(dir, "s.json")).MadeCold
	if m == nil || len(m.CacheDirs) == 0 {
		t.Fatalf("made_cold %+v", m)
	}
	root := filepath.Dir(m.CacheDirs[0].Dir)
	seen := map[string]string{}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for _, line := range lines[:len(lines)-1] {
		v, rest, _ := strings.Cut(line, "=")
		d, n, _ := strings.Cut(rest, " ")
		if v == "HF_HOME" {
			if d != dir+"/hf" {
				t.Errorf("HF_HOME=%s under --cold, want the user's %s/hf", d, dir)
			}
			continue
		}
		if filepath.Dir(d) != root || n != "0" {
			t.Errorf("%s=%s with %s entries, want an empty directory in %s", v, d, n, root)
		}
		if other, dup := seen[d]; dup {
			t.Errorf("%s and %s share %s", v, other, d)
		}
		seen[d] = v
	}
	if last := lines[len(lines)-1]; last != "1" {
		t.Errorf("TRITON_CACHE_DIR is set %s times in the command's environment", last)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the fresh root %s is still there (%v)", root, err)
	}
}

// TestRunColdNotRootChangesNothing: --cold of a run that cannot be traced
// fails before it evicts or creates anything, even where the user could
// have evicted the file (their own).
func TestRunColdNotRootChangesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	dir := e2eutil.DiskDir(t)
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "nobodys.bin")
	writeModel(t, file, 4*mib)
	if err := os.Chown(file, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	e2eutil.WarmUp(t, file)
	cmd := exec.Command(ctBin, "--cold", "--evict", file, "--", "true")
	cmd.Env = append(os.Environ(), "SUDO_UID=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	got, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure || !strings.Contains(string(got), "needs root") {
		t.Fatalf("--cold as nobody: %v\n%s", err, got)
	}
	if strings.Contains(string(got), "cold run") {
		t.Errorf("--cold as nobody did something before failing:\n%s", got)
	}
	if n, want := e2eutil.ResidentPages(t, file), 4*mib/os.Getpagesize(); n != want {
		t.Errorf("%d of %d pages cached after a refused --cold", n, want)
	}
}
