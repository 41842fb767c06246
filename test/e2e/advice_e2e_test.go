package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/record"
)

// adviceRun traces argv with env and returns its record and JSON summary.
func adviceRun(t *testing.T, env []string, argv ...string) (*record.Record, adviceSummary) {
	t.Helper()
	dir := t.TempDir()
	rec, sum := filepath.Join(dir, "run.rec"), filepath.Join(dir, "sum.json")
	args := append([]string{"run", "-q", "-o", rec, "--json", sum, "--"}, argv...)
	code, _, stderr := coldtrace(t, env, args...)
	if code != 0 {
		t.Fatalf("coldtrace %v: exit %d\n%s", argv, code, stderr)
	}
	r := readRecord(t, rec)
	if err := invariants.Err(r); err != nil {
		t.Errorf("record of %v: %v", argv, err)
	}
	b, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	var s adviceSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary: %v", err)
	}
	s.recPath = rec
	return r, s
}

type adviceSummary struct {
	CacheMisses []advice.CacheMiss      `json:"cache_misses"`
	Persist     []advice.Persist        `json:"persist"`
	Reads       []advice.FileRead       `json:"reads"`
	NoCache     []advice.NoCacheCompile `json:"no_cache"`
	Advice      []advice.Action         `json:"advice"`
	recPath     string
}

func workloadPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "workloads", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fileOf(r *record.Record, path string) *record.File {
	for i := range r.Files {
		if r.Files[i].Path == path {
			return &r.Files[i]
		}
	}
	return nil
}

// A 256 MiB file read by random 4 KiB page faults (MADV_RANDOM) and one
// read sequentially, in one run: the order and the time per miss are
// reported, and only the random one gets the pre-read advice.
func TestAdviceReadOrder(t *testing.T) {
	requireTracing(t)
	const pages = 4096
	seq := e2eutil.EvictableFile(t, 256<<20)
	rnd := e2eutil.EvictableFile(t, 256<<20)
	r, s := adviceRun(t, nil, "/usr/bin/python3", workloadPath(t, "readorder.py"), seq, rnd, "4096")

	fs, fr := fileOf(r, seq), fileOf(r, rnd)
	if fs == nil || fr == nil || fs.Order == nil || fr.Order == nil {
		t.Fatalf("no read order: seq %+v, random %+v", fs, fr)
	}
	t.Logf("sequential: %+v", *fs.Order)
	t.Logf("random:     %+v", *fr.Order)
	if got := fs.Order.Order(); got != "sequential" {
		t.Errorf("sequential file's order = %q", got)
	}
	if got := fr.Order.Order(); got != "random" {
		t.Errorf("random file's order = %q", got)
	}
	if fs.Order.ReadPages < 65536*9/10 || fs.Order.FaultPages != 0 {
		t.Errorf("sequential file: %d pages by read, %d by fault; want 65536 by read", fs.Order.ReadPages, fs.Order.FaultPages)
	}
	// Each fault brings in its page only (MADV_RANDOM): one miss each.
	if fr.Order.FaultPages < pages*9/10 || fr.Order.FaultPages > pages*11/10 || fr.Order.ReadPages != 0 {
		t.Errorf("random file: %d pages by fault, %d by read; want ~%d by fault", fr.Order.FaultPages, fr.Order.ReadPages, pages)
	}
	if fr.Order.Misses < pages*9/10 {
		t.Errorf("random file: %d misses, want ~%d", fr.Order.Misses, pages)
	}

	var seqRead, rndRead *advice.FileRead
	for i := range s.Reads {
		switch s.Reads[i].Path {
		case seq:
			seqRead = &s.Reads[i]
		case rnd:
			rndRead = &s.Reads[i]
		}
	}
	if seqRead == nil || rndRead == nil {
		t.Fatalf("reads in the summary: %+v", s.Reads)
	}
	t.Logf("%s", seqRead.Sentence)
	t.Logf("%s", rndRead.Sentence)
	if rndRead.MissNS <= 0 || rndRead.BaselineMBps <= 0 || rndRead.MBps*4 > rndRead.BaselineMBps {
		t.Errorf("random read: %+v", rndRead)
	}
	var preRead, seqAdvice int
	for _, a := range s.Advice {
		if strings.Contains(a.Action, rnd) && strings.Contains(a.Action, "pre-read") {
			preRead++
		}
		if strings.Contains(a.Action, seq) {
			seqAdvice++
		}
	}
	if preRead != 1 || seqAdvice != 0 {
		t.Errorf("advice %+v: want the pre-read advice for the random file only", s.Advice)
	}

	// The random read alone has no sequential rate to compare with: the
	// rate alone, no advice; --baseline gives it the first run's.
	e2eutil.Evict(t, rnd)
	r2, s2 := adviceRun(t, nil, "/usr/bin/python3", workloadPath(t, "readorder.py"), "-", rnd, "4096")
	if f := fileOf(r2, rnd); f == nil || f.Order.Order() != "random" {
		t.Fatalf("random alone: %+v", f)
	}
	if len(s2.Advice) != 0 {
		t.Errorf("random alone, no baseline: advice %+v", s2.Advice)
	}
	code, out, stderr := coldtrace(t, nil, "report", "--baseline", s.recPath, s2.recPath)
	if code != 0 || !strings.Contains(out, "pre-read it (`coldtrace prefetch`) or disable mmap") {
		t.Errorf("report --baseline: exit %d\n%s\n%s", code, out, stderr)
	}
}

// adviceNumbaProgram copies the cache=True workload into a directory of its
// own and returns its path.
func adviceNumbaProgram(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import numba").Run(); err != nil {
		t.Skipf("no Numba for /usr/bin/python3 (Debian python3-numba): %v", err)
	}
	src, err := os.ReadFile(workloadPath(t, "numbacached.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "numbacached.py")
	if err := os.WriteFile(p, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func adviceNumbaCache(t *testing.T, r *record.Record) record.Cache {
	t.Helper()
	if r.JIT != nil {
		for _, c := range r.JIT.Caches {
			if c.Name == "numba" && c.Lookups > 0 {
				return c
			}
		}
	}
	t.Fatalf("no Numba cache lookups in the record: %+v", r.JIT)
	return record.Cache{}
}

// diffChanges runs `coldtrace diff --json A B` and returns its cache
// changes.
func diffChanges(t *testing.T, a, b string) []advice.CacheChange {
	t.Helper()
	code, out, stderr := coldtrace(t, nil, "diff", "--json", a, b)
	if code != 0 {
		t.Fatalf("diff: exit %d\n%s", code, stderr)
	}
	var d struct {
		CacheChanges []advice.CacheChange `json:"cache_changes"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("diff JSON: %v", err)
	}
	return d.CacheChanges
}

func changeOf(chs []advice.CacheChange, cache string) *advice.CacheChange {
	for i := range chs {
		if chs[i].Cache == cache {
			return &chs[i]
		}
	}
	return nil
}

// Numba with cache=True and a fixed NUMBA_CACHE_DIR: touching the source
// changes the key (its timestamp is in it), copying the program files the
// cache under another directory, and moving NUMBA_CACHE_DIR moves the root;
// each is reported as such, not as a cold cache.
func TestAdviceNumbaWhyMissed(t *testing.T) {
	requireTracing(t)
	base := t.TempDir()
	prog := adviceNumbaProgram(t, filepath.Join(base, "proj"))
	cacheDir := filepath.Join(base, "cache")
	env := []string{"NUMBA_CACHE_DIR=" + cacheDir}

	ra, sa := adviceRun(t, env, "/usr/bin/python3", prog)
	ca := adviceNumbaCache(t, ra)
	if ca.EntriesWritten == 0 || ca.Hits != 0 || len(ca.WrittenKeys) == 0 {
		t.Fatalf("first run: %+v", ca)
	}
	if len(sa.CacheMisses) != 1 || sa.CacheMisses[0].Reason != advice.Cold {
		t.Errorf("first run's misses: %+v, want cold", sa.CacheMisses)
	}

	// The source's modification time is part of Numba's key.
	st, err := os.Stat(prog)
	if err != nil {
		t.Fatal(err)
	}
	later := st.ModTime().Add(10e9)
	if err := os.Chtimes(prog, later, later); err != nil {
		t.Fatal(err)
	}
	rb, sb := adviceRun(t, env, "/usr/bin/python3", prog)
	cb := adviceNumbaCache(t, rb)
	if cb.EntriesStale == 0 || cb.Hits != 0 {
		t.Errorf("after touch: %+v, want stale entries and no hits", cb)
	}
	if len(sb.CacheMisses) != 1 || sb.CacheMisses[0].Reason != advice.KeyChanged || !strings.Contains(sb.CacheMisses[0].Sentence, "key changed") {
		t.Errorf("after touch: misses %+v, want key changed", sb.CacheMisses)
	}
	if ch := changeOf(diffChanges(t, sa.recPath, sb.recPath), "numba"); ch == nil || ch.Reason != advice.KeyChanged || ch.Stale == 0 {
		t.Errorf("diff after touch: %+v, want key changed", ch)
	}
	code, out, _ := coldtrace(t, nil, "diff", sa.recPath, sb.recPath)
	if code != 0 || !strings.Contains(out, "the key changed") {
		t.Errorf("diff text:\n%s", out)
	}

	// The same program in another directory, same NUMBA_CACHE_DIR.
	copied := adviceNumbaProgram(t, filepath.Join(base, "copy"))
	_, sc := adviceRun(t, env, "/usr/bin/python3", copied)
	ch := changeOf(diffChanges(t, sa.recPath, sc.recPath), "numba")
	if ch == nil || ch.Reason != advice.MovedRoot || ch.Foreign == 0 {
		t.Errorf("diff of the copied program: %+v, want moved root", ch)
	} else {
		t.Logf("copied: %s", ch.Sentence)
	}

	// NUMBA_CACHE_DIR moved between the runs.
	_, sd := adviceRun(t, []string{"NUMBA_CACHE_DIR=" + filepath.Join(base, "moved")}, "/usr/bin/python3", prog)
	ch = changeOf(diffChanges(t, sa.recPath, sd.recPath), "numba")
	if ch == nil || ch.Reason != advice.MovedRoot || ch.RootB != filepath.Join(base, "moved") {
		t.Errorf("diff after moving NUMBA_CACHE_DIR: %+v, want moved root", ch)
	} else {
		t.Logf("moved: %s", ch.Sentence)
	}
}

// A cache on a tmpfs the test mounts is lost at reboot: persist says so,
// and report --persist prints an export line sh accepts.
func TestAdvicePersistTmpfs(t *testing.T) {
	requireTracing(t)
	base := t.TempDir()
	prog := adviceNumbaProgram(t, filepath.Join(base, "proj"))
	mnt := filepath.Join(base, "tmpfs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "coldtrace-test", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	cacheDir := filepath.Join(mnt, "numba cache")
	r, s := adviceRun(t, []string{"NUMBA_CACHE_DIR=" + cacheDir}, "/usr/bin/python3", prog)
	c := adviceNumbaCache(t, r)
	if c.FS != "tmpfs" || c.Survival != "lost at reboot" {
		t.Errorf("cache on tmpfs: fs %q, survival %q", c.FS, c.Survival)
	}
	var p *advice.Persist
	for i := range s.Persist {
		if s.Persist[i].Cache == "numba" {
			p = &s.Persist[i]
		}
	}
	if p == nil || p.Survival != "lost at reboot" || p.Env != "NUMBA_CACHE_DIR" || p.RerunNS <= 0 || p.Root != cacheDir {
		t.Fatalf("persist: %+v\ncache: lookups %d, hits %d, misses %d, written %d, compile %d ns; path syscalls: %s; windows %+v; uprobes %+v",
			p, c.Lookups, c.Hits, c.Misses, c.EntriesWritten, c.CompileNS, r.JIT.PathSyscalls, r.JIT.Windows, r.JIT.Uprobes)
	}
	code, out, stderr := coldtrace(t, nil, "report", "--persist", s.recPath)
	if code != 0 || !strings.Contains(out, "export NUMBA_CACHE_DIR=") {
		t.Fatalf("report --persist: exit %d\n%s\n%s", code, out, stderr)
	}
	t.Logf("report --persist:\n%s", out)
	script := filepath.Join(base, "persist.sh")
	if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("sh", "-n", script).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v: %s", err, b)
	}
	// Sourced, it points Numba at a directory off the tmpfs.
	got, err := exec.Command("sh", "-c", `. "$0"; printf %s "$NUMBA_CACHE_DIR"`, script).Output()
	if err != nil || len(got) == 0 || strings.HasPrefix(string(got), mnt) {
		t.Errorf("sourced: NUMBA_CACHE_DIR=%q (%v)", got, err)
	}
	code, text, _ := coldtrace(t, nil, "report", s.recPath)
	if code != 0 || !strings.Contains(text, "lost at reboot") || !strings.Contains(text, "persist the Numba cache") {
		t.Errorf("report text:\n%s", text)
	}
}

// Numba without cache=True compiles in every process: its llvmlite entry
// points give the compile a window, reported as a compile with no cache.
func TestAdviceNumbaNoCache(t *testing.T) {
	requireTracing(t)
	adviceNumbaProgram(t, t.TempDir())
	r, s := adviceRun(t, nil, "/usr/bin/python3", workloadPath(t, "numbanocache.py"))
	var calls uint64
	for _, u := range r.JIT.Uprobes {
		if strings.HasPrefix(u.Name, "libllvmlite:") {
			calls += u.Calls
		}
	}
	if calls == 0 {
		t.Fatalf("no llvmlite calls probed: %+v", r.JIT.Uprobes)
	}
	if len(s.NoCache) != 1 || s.NoCache[0].Framework != "Numba" || !strings.Contains(s.NoCache[0].Sentence, "compiled with no cache") {
		t.Fatalf("no cache: %+v", s.NoCache)
	}
	t.Logf("%s", s.NoCache[0].Sentence)
	code, out, _ := coldtrace(t, nil, "report", s.recPath)
	if code != 0 || !strings.Contains(out, "compiled with no cache") || !strings.Contains(out, "cache=True") {
		t.Errorf("report:\n%s", out)
	}
}
