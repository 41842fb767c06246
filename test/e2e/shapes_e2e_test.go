package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
)

// shapeSeeds are the generator's seeds every e2e run traces: together
// they give every dimension every value (TestShapes checks it): the
// greedy cover `gen.py cover 5000` prints, and the first seeds besides,
// 50 in all (about 40 s here).
var shapeSeeds = []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 49, 51, 57, 82, 88, 107, 112, 164, 176, 5085}

// shapeCase is what testdata/shapes/gen.py prepare chose; paths in
// base64 (names need not be UTF-8).
type shapeCase struct {
	Job         string `json:"job"`
	Name        string `json:"name"`
	Read        string `json:"read"`
	Reader      string `json:"reader"`
	Writer      string `json:"writer"`
	Receiver    string `json:"receiver"`
	Temp        string `json:"temp"`
	Exit        string `json:"exit"`
	FS          string `json:"fs"`
	Mount       string `json:"mount"`
	View        []byte `json:"view"`
	Cleanup     []byte `json:"cleanup"`
	Seed        uint64 `json:"seed"`
	Home        []byte `json:"home"`
	Path        []byte `json:"path"`
	TempPath    []byte `json:"temp_path"`
	Source      []byte `json:"source"`
	Size        int64  `json:"size"`
	SourceSize  int64  `json:"source_size"`
	Connections int    `json:"connections"`
}

// shapeOracle is what the job said it did.
type shapeOracle struct {
	ReadBytes   int64  `json:"read_bytes"`
	Received    uint64 `json:"received"`
	Written     int64  `json:"written"`
	ObjectBytes int64  `json:"object_bytes"`
	SpanNS      int64  `json:"span_ns"`
	PID         int32  `json:"pid"`
	// ExpectedFail names the checks coldtrace is known to fail on this
	// shape, each with the reason.
	ExpectedFail map[string]string `json:"expected_fail"`
}

// check fails the test with the message unless ok, or, when the check
// is one the oracle expects to fail, logs why.
func (o shapeOracle) check(t *testing.T, name string, ok bool, format string, args ...any) {
	t.Helper()
	switch why, expected := o.ExpectedFail[name]; {
	case ok && expected:
		t.Logf("%s: passes, though expected to fail (%s)", name, why)
	case ok:
	case expected:
		t.Logf("%s: fails as expected (%s): %s", name, why, fmt.Sprintf(format, args...))
	default:
		t.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
}

// dims lists the case's dimensions as "dim=value", the job's first.
func (c shapeCase) dims() []string {
	out := []string{"job=" + c.Job, c.Job + ".name=" + c.Name}
	for _, kv := range [][2]string{{"read", c.Read}, {"reader", c.Reader}, {"writer", c.Writer}, {"receiver", c.Receiver},
		{"temp", c.Temp}, {"exit", c.Exit}, {"fs", c.FS}, {"mount", c.Mount}} {
		if kv[1] != "" {
			out = append(out, c.Job+"."+kv[0]+"="+kv[1])
		}
	}
	return out
}

// shapeServer serves the bodies of the generator's downloads on
// 127.0.0.1: a request "SEED SIZE OFFSET LENGTH\n" gets those bytes of
// the SIZE-byte body of SEED, paced in 256 KiB pieces every 10 ms so
// that a download spans several polls, then the server closes.
func shapeServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	bodies := map[[2]uint64][]byte{}
	body := func(seed, size uint64) []byte {
		mu.Lock()
		defer mu.Unlock()
		k := [2]uint64{seed, size}
		if bodies[k] == nil {
			var key [32]byte
			copy(key[:], strconv.FormatUint(seed, 10))
			b := make([]byte, size)
			_, _ = rand.NewChaCha8(key).Read(b)
			bodies[k] = b
		}
		return bodies[k]
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				var seed, size, off, n uint64
				if err != nil {
					return
				}
				if _, err := fmt.Sscan(line, &seed, &size, &off, &n); err != nil || size > 1<<30 || off+n > size {
					return
				}
				b := body(seed, size)[off : off+n]
				for o := 0; o < len(b); o += servePiece {
					if _, err := c.Write(b[o:min(o+servePiece, len(b))]); err != nil {
						return
					}
					time.Sleep(servePace)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// shapeEnv is what every case needs: python3, the generator, the
// io_uring reader and the body server.
type shapeEnv struct {
	python, gen, uring, addr string
}

func newShapeEnv(t *testing.T) shapeEnv {
	t.Helper()
	e := shapeEnv{python: "/usr/bin/python3"}
	if _, err := os.Stat(e.python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	gen, err := filepath.Abs("../../testdata/shapes/gen.py")
	if err != nil {
		t.Fatal(err)
	}
	e.gen, e.uring, e.addr = gen, buildC(t, "uring_async_read"), shapeServer(t)
	return e
}

// shapeSweep is the seeds to trace: SHAPES_SEEDS (comma-separated) or
// SHAPES_N seeds from SHAPES_SEED (random when unset) when set, else
// shapeSeeds.
func shapeSweep(t *testing.T) (seeds []uint64, fixed bool) {
	if s := os.Getenv("SHAPES_SEEDS"); s != "" {
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("SHAPES_SEEDS: %v", err)
			}
			seeds = append(seeds, n)
		}
		return seeds, false
	}
	if s := os.Getenv("SHAPES_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("SHAPES_N: %v", err)
		}
		first := rand.Uint64() % 1_000_000
		if s := os.Getenv("SHAPES_SEED"); s != "" {
			if first, err = strconv.ParseUint(s, 10, 64); err != nil {
				t.Fatalf("SHAPES_SEED: %v", err)
			}
		}
		t.Logf("sweep: %d seeds from %d", n, first)
		for i := range uint64(n) {
			seeds = append(seeds, first+i)
		}
		return seeds, false
	}
	return shapeSeeds, true
}

// TestShapes: the generator's jobs, each done in the way its seed
// chooses, are named and counted in the record as the job's own oracle
// says: bytes, names and counts exactly, time within bounds.
func TestShapes(t *testing.T) {
	requireTracing(t)
	env := newShapeEnv(t)
	seeds, fixed := shapeSweep(t)
	covered := map[string]bool{}
	var tmpfsDownloads, unlisted int
	var mu sync.Mutex
	// Cases run side by side (go test's -parallel, the CPUs by
	// default): each has its own files, mounts and processes, and most
	// of a case is waiting (a server's pace, a FUSE mount, a child's
	// exit), so two at once halve the sweep; its counts are exact either
	// way, and its times only bounds. The group returns when all have.
	t.Run("cases", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
				t.Parallel()
				c, notListed := runShape(t, env, seed)
				mu.Lock()
				defer mu.Unlock()
				for _, d := range c.dims() {
					covered[d] = true
				}
				if c.Job == "download" && c.FS == "tmpfs" {
					tmpfsDownloads++
				}
				if notListed {
					unlisted++
				}
			})
		}
	})
	// A tmpfs body coldtrace did not list in time is said so in the
	// record, but the watcher must list most of them: once in a while
	// under load, never as a rule.
	if unlisted > 0 && unlisted*4 > tmpfsDownloads {
		t.Errorf("%d of %d downloads into tmpfs went unlisted: the watcher of receiving processes' files is not keeping up", unlisted, tmpfsDownloads)
	}
	if fixed && !t.Failed() {
		checkCoverage(t, env, covered)
	}
}

// runShape prepares, traces and checks the case of seed; unlisted says
// its tmpfs download went unseen as the record says a tmpfs body can
// (checkShapeDownload).
func runShape(t *testing.T, env shapeEnv, seed uint64) (c shapeCase, unlisted bool) {
	t.Helper()
	root := persistentHome(t)
	prep := exec.Command(env.python, env.gen, "prepare", strconv.FormatUint(seed, 10), root)
	out, err := prep.Output()
	if err != nil {
		t.Fatalf("prepare: %v\n%s", err, stderrOf(err))
	}
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("prepare printed %q: %v", out, err)
	}
	t.Logf("case: %s", strings.Join(c.dims(), " "))
	if len(c.Cleanup) > 0 {
		t.Cleanup(func() { os.RemoveAll(string(c.Cleanup)) })
	}
	defer func() {
		if t.Failed() {
			t.Logf("replay: sudo SHAPES_SEEDS=%d go test -count=1 -v -run '^TestShapes$' ./test/e2e", seed)
		}
	}()
	rec := filepath.Join(root, "run.rec")
	code, stdout, stderr := coldtrace(t, []string{"HOME=" + string(c.Home), "SHAPES_URING=" + env.uring},
		"run", "-q", "-o", rec, "--", env.python, env.gen, "run", filepath.Join(root, "case.json"), env.addr)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	var o shapeOracle
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &o); err != nil {
		t.Fatalf("the job said %q: %v", stdout, err)
	}
	r := readRecord(t, rec)
	if err := invariants.Err(r); err != nil {
		t.Error(err)
	}
	if r.WallNS < o.SpanNS {
		t.Errorf("wall %v, shorter than the job's own span %v", time.Duration(r.WallNS), time.Duration(o.SpanNS))
	}
	switch c.Job {
	case "read":
		checkShapeRead(t, c, o, r)
		if c.Mount != "none" && c.Read != "direct" { // O_DIRECT reads no page status could know
			checkStatusFromHost(t, rec, string(c.Path))
		}
	case "download":
		unlisted = checkShapeDownload(t, c, o, r, env.addr)
	case "compile":
		checkShapeCompile(t, c, o, r)
	}
	return c, unlisted
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// fileNamed is the record's file named path (byte-exact), or nil and a
// failure.
func fileNamed(t *testing.T, r *record.Record, path string) *record.File {
	t.Helper()
	f, problem := findFile(r, path)
	if f == nil {
		t.Error(problem)
	}
	return f
}

// findFile is the record's file named path (byte-exact), or nil and what
// the record has instead: the same file under another name, or nothing.
func findFile(r *record.Record, path string) (*record.File, string) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, err.Error()
	}
	for i, f := range r.Files {
		if f.Ino != st.Ino {
			continue
		}
		if f.Path == path {
			return &r.Files[i], ""
		}
		return nil, fmt.Sprintf("files[] names %q (inode %d) %q (first %q)", path, st.Ino, f.Path, f.FirstPath)
	}
	return nil, fmt.Sprintf("files[] lacks %q (%d bytes, inode %d)", path, len(path), st.Ino)
}

func pagesOf(n int64) uint64 { return uint64((n + 4095) / 4096) }

// checkShapeRead: the model file is named byte-exact, uncut, its size,
// every page read and missed once.
func checkShapeRead(t *testing.T, c shapeCase, o shapeOracle, r *record.Record) {
	if o.ReadBytes != c.Size {
		t.Fatalf("the job read %d bytes of %d", o.ReadBytes, c.Size)
	}
	var f *record.File
	if c.Mount == "bind" || c.Mount == "bindlive" {
		f = checkBindName(t, o, r, string(c.View), string(c.Path))
	} else {
		f = fileNamed(t, r, string(c.Path))
	}
	if f == nil {
		return
	}
	pages := pagesOf(c.Size)
	if c.Read == "direct" {
		// O_DIRECT bypasses the page cache: no page is accessed or
		// missed, every byte is read from disk again on every run.
		if f.NameCut || f.SizeBytes != c.Size || f.PagesMissed != 0 || f.DirectBytes < uint64(c.Size) || f.DirectBytes > pages*4096 {
			t.Errorf("%q: cut %v, %d bytes, pages missed %d, direct bytes %d; want %d bytes, none missed, %d direct bytes (page-rounded)",
				f.Path, f.NameCut, f.SizeBytes, f.PagesMissed, f.DirectBytes, c.Size, c.Size)
		}
		return
	}
	o.check(t, "pages_accessed", f.PagesAccessed == pages, "%q: %d pages accessed, want %d", f.Path, f.PagesAccessed, pages)
	// Pages accessed are held above (an expected failure on some shapes
	// passes there, not here).
	if f.NameCut || f.SizeBytes != c.Size || f.PagesMissed-f.PagesReread != pages {
		t.Errorf("%q: cut %v, %d bytes, pages accessed %d, missed %d (re-read %d); want %d bytes, %d pages accessed and missed",
			f.Path, f.NameCut, f.SizeBytes, f.PagesAccessed, f.PagesMissed, f.PagesReread, c.Size, pages)
	}
	if f.IOWaitNS < 0 || f.IOWaitNS > r.WallNS {
		t.Errorf("%q: I/O wait %v outside [0, wall %v]", f.Path, time.Duration(f.IOWaitNS), time.Duration(r.WallNS))
	}
}

// checkShapeDownload: one download of the body's bytes over the job's
// connections, into the final name, first written under the temporary
// one, kept; its span inside the run and no longer than the job's. A
// body written to tmpfs is seen by listing the receiving process's open
// files every few ms: one written and closed before coldtrace got a CPU
// to list them may go unseen, and the record must then say so (not
// seen, unlisted) and name no file; it returns whether it did.
func checkShapeDownload(t *testing.T, c shapeCase, o shapeOracle, r *record.Record, addr string) (unlisted bool) {
	if o.Received != uint64(c.Size) || o.Written != c.Size {
		t.Fatalf("the job received %d and wrote %d bytes of %d", o.Received, o.Written, c.Size)
	}
	if len(r.Downloads) != 1 {
		t.Fatalf("%d downloads, want 1: %+v", len(r.Downloads), r.Downloads)
	}
	d := r.Downloads[0]
	final, temp := string(c.Path), string(c.TempPath)
	if d.Bytes != uint64(c.Size) || len(d.Connections) != max(c.Connections, 1) || d.Peer != addr {
		t.Errorf("download of %d bytes over %d connections from %s, want %d over %d from %s", d.Bytes, len(d.Connections), d.Peer,
			c.Size, max(c.Connections, 1), addr)
	}
	if d.StartNS < 0 || d.EndNS > r.WallNS || d.EndNS <= d.StartNS || d.EndNS-d.StartNS > o.SpanNS {
		t.Errorf("download span [%d, %d]: want inside the run [0, %d] and no longer than the job's %d ns", d.StartNS, d.EndNS,
			r.WallNS, o.SpanNS)
	}
	if c.FS == "tmpfs" && d.Destination == record.DestNotSeen && d.Unlisted {
		t.Logf("destination not seen, the receiving process's open files unlisted while it received (%v): said so", time.Duration(d.EndNS-d.StartNS))
		if d.Path != "" || len(d.Files) != 0 {
			t.Errorf("an unlisted download names files: %q, %+v", d.Path, d.Files)
		}
		return true
	}
	if d.Destination != record.DestFile || d.Path != final {
		t.Errorf("destination %s %q, want file %q", d.Destination, d.Path, final)
	}
	wantWritten := ""
	if temp != final {
		wantWritten = temp
	}
	if len(d.Files) == 0 || d.Files[0].Path != final || d.Files[0].WrittenPath != wantWritten ||
		d.Files[0].BytesWritten != pagesOf(c.Size)*4096 || d.Files[0].Gone || d.Files[0].NameUnknown {
		t.Errorf("files %+v, want %q first, written as %q, %d pages", d.Files, final, wantWritten, pagesOf(c.Size))
	}
	if c.FS == "tmpfs" {
		return false // files[] holds the page-cache files: tmpfs fills none the events see
	}
	if f := fileNamed(t, r, final); f != nil && f.FirstPath != wantWritten {
		t.Errorf("files[] gives %q the first name %q, want %q", final, f.FirstPath, wantWritten)
	}
	return false
}

// checkShapeCompile: the compiler's argv is kept byte-exact, the source
// is read from disk whole, the object is named by its final name with
// its first beside it and counted as created.
func checkShapeCompile(t *testing.T, c shapeCase, o shapeOracle, r *record.Record) {
	src, final, temp := string(c.Source), string(c.Path), string(c.TempPath)
	var cc *record.Process
	for i, p := range r.Processes {
		if slices.Contains(p.Args, src) && slices.Contains(p.Args, "-DSHAPE_TAG=\"\xff\xfe\"") {
			cc = &r.Processes[i]
		}
	}
	if cc == nil || cc.ArgsCut {
		t.Errorf("no process has argv with %q and the -D of non-UTF-8 bytes: %d processes", src, len(r.Processes))
		for _, p := range r.Processes {
			t.Logf("  %d %s %q", p.PID, p.Exe, p.Args)
		}
	}
	if f := fileNamed(t, r, src); f != nil && (f.PagesAccessed != pagesOf(c.SourceSize) || f.PagesMissed != pagesOf(c.SourceSize)) {
		t.Errorf("source %q: pages accessed %d, missed %d; want %d", src, f.PagesAccessed, f.PagesMissed, pagesOf(c.SourceSize))
	}
	wantFirst := ""
	if temp != final {
		wantFirst = temp
	}
	f, problem := findFile(r, final)
	o.check(t, "object_final_name", f != nil, "%s", problem)
	if f == nil {
		return
	}
	pages := pagesOf(o.ObjectBytes)
	if f.FirstPath != wantFirst || f.PagesCreated+f.PagesMissed != pages {
		t.Errorf("object %q: first %q, pages created %d, missed %d; want first %q, %d pages", final, f.FirstPath,
			f.PagesCreated, f.PagesMissed, wantFirst, pages)
	}
	o.check(t, "object_not_missed", f.PagesMissed == 0 && f.BytesFromDisk == 0, "object %q: %d of its %d pages missed, %d bytes from disk",
		final, f.PagesMissed, pages, f.BytesFromDisk)
}

// checkCoverage fails unless the fixed seeds gave every dimension of
// the generator every value.
func checkCoverage(t *testing.T, env shapeEnv, covered map[string]bool) {
	out, err := exec.Command(env.python, env.gen, "dims").Output()
	if err != nil {
		t.Fatal(err)
	}
	var dims map[string][]string
	if err := json.Unmarshal(out, &dims); err != nil {
		t.Fatal(err)
	}
	jobDims := map[string][]string{"read": {"read", "reader", "mount"}, "download": {"writer", "receiver", "temp", "exit", "fs"}, "compile": {"temp"}}
	var missing []string
	for _, job := range dims["job"] {
		for _, dim := range append([]string{"name"}, jobDims[job]...) {
			for _, v := range dims[dim] {
				if k := job + "." + dim + "=" + v; !covered[k] {
					missing = append(missing, k)
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("the fixed seeds leave out %s", strings.Join(missing, " "))
	}
}

// checkBindName is the record's entry for the file read at view through
// a bind mount of host's directory: named as the process saw it, and as
// the host sees it beside that; named at least as the host sees it.
func checkBindName(t *testing.T, o shapeOracle, r *record.Record, view, host string) *record.File {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(host, &st); err != nil {
		t.Fatal(err)
	}
	for i, f := range r.Files {
		if f.Ino != st.Ino {
			continue
		}
		o.check(t, "bind_view_name", f.Path == view && f.HostPath == host, "files[] names %q %q (host %q), want %q (host %q)",
			host, f.Path, f.HostPath, view, host)
		if f.Path != host && f.HostPath != host {
			t.Errorf("files[] names %q %q (host %q): neither is the host's name", host, f.Path, f.HostPath)
		}
		return &r.Files[i]
	}
	t.Errorf("files[] lacks %q (read as %q)", host, view)
	return nil
}

// checkStatusFromHost: status --from the record, run on the host, finds
// the file the run read through a bind mount by the host's name, with
// every page known.
func checkStatusFromHost(t *testing.T, rec, host string) {
	t.Helper()
	code, out, stderr := coldtrace(t, nil, "status", "--json", "--from", rec)
	if code != 0 {
		t.Fatalf("status --from: exit %d\n%s", code, stderr)
	}
	noMissingFiles(t, "status --from", stderr)
	var doc statusJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	for _, f := range doc.Files {
		if f.Path == host {
			if !f.Known || f.Pages == 0 {
				t.Errorf("status --from: %q known %v, %d pages", host, f.Known, f.Pages)
			}
			return
		}
	}
	if utf8.ValidString(host) {
		t.Errorf("status --from does not list %q", host)
	}
}
