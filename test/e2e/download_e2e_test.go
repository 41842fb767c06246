package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
)

const (
	// hubBody is the model the test hub serves: 64 MiB in 1 MiB writes,
	// 25 ms apart (about 1.6 s), paced like a remote hub.
	hubBody  = 64 << 20
	hubPace  = 25 * time.Millisecond
	hubChunk = 1 << 20
)

// hubServer serves the model on 127.0.0.1 for the length of the test.
func hubServer(t *testing.T) *httptest.Server {
	chunk := make([]byte, hubChunk)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(hubBody))
		for n := hubBody; n > 0; n -= hubChunk {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(hubPace)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fetchResult is what testdata/workloads/hubfetch.py prints: its own
// timing of the download, request to last byte.
type fetchResult struct {
	Bytes   uint64 `json:"bytes"`
	T0      int64  `json:"t0"`
	T1      int64  `json:"t1"`
	Skipped bool   `json:"skipped"`
	// OwnNS is a child's own timing of its fetch (curl's time_total):
	// the child's span also holds its start, not a download.
	OwnNS int64 `json:"own_ns"`
}

type fetchRun struct {
	client fetchResult
	rec    *record.Record
	res    *attribution.Result
	text   string // the summary coldtrace printed
	recOut string // the record's path
}

// tracedFetch runs the hub client under coldtrace with HOME=home and
// returns the client's timing, the record and coldtrace's summary.
func tracedFetch(t *testing.T, home, url string) fetchRun {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	script, err := filepath.Abs("../../testdata/workloads/hubfetch.py")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run.rec")
	code, stdout, stderr := coldtrace(t, []string{"HOME=" + home}, "-o", out, "--", python, script, url)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	var run fetchRun
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &run.client); err != nil {
		t.Fatalf("client said %q: %v", stdout, err)
	}
	run.rec, run.text, run.recOut = readRecord(t, out), stderr, out
	if err := invariants.Err(run.rec); err != nil {
		t.Error(err)
	}
	run.res = attribution.Analyze(run.rec)
	t.Logf("coldtrace said:\n%s", stderr)
	return run
}

func categoryNS(res *attribution.Result, c attribution.Category) int64 {
	if row := res.Row(c); row != nil {
		return row.NS
	}
	return -1
}

// TestHubDownloadIsDownload: a Python client
// fetches a 64 MiB model from a server on 127.0.0.1 into the Hugging Face
// hub cache of its HOME (a temporary name renamed into place). The time
// is downloads, not other wait, within 10% of the client's own timing;
// the verdict names the download and, the cache being on a disk, says a
// warm rerun skips it; the rerun, finding the blob, downloads nothing,
// and diff says why B was faster.
func TestHubDownloadIsDownload(t *testing.T) {
	requireTracing(t)
	srv := hubServer(t)
	home := t.TempDir()
	if fs := fsType(t, home); fs == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs: the test needs a persistent cache", home)
	}
	cold := tracedFetch(t, home, srv.URL+"/org/m/resolve/main/model.safetensors")
	if cold.client.Skipped || cold.client.Bytes != hubBody {
		t.Fatalf("client: %+v", cold.client)
	}
	clientNS := cold.client.T1 - cold.client.T0
	dl, other := categoryNS(cold.res, attribution.Download), categoryNS(cold.res, attribution.OtherWait)
	t.Logf("client: %v for %d bytes; coldtrace: downloads %v, other wait %v, wall %v, warm estimate %v",
		time.Duration(clientNS), cold.client.Bytes, time.Duration(dl), time.Duration(other),
		time.Duration(cold.rec.WallNS), time.Duration(cold.res.WarmEstimateNS))
	if diff := dl - clientNS; diff < -clientNS/10 || diff > clientNS/10 {
		t.Errorf("downloads %v, the client measured %v: want within 10%%", time.Duration(dl), time.Duration(clientNS))
	}
	if other > clientNS/10 {
		t.Errorf("other wait %v: the download's waiting went there", time.Duration(other))
	}

	if len(cold.rec.Downloads) != 1 {
		t.Fatalf("%d downloads in the record, want 1: %+v", len(cold.rec.Downloads), cold.rec.Downloads)
	}
	d := cold.rec.Downloads[0]
	blob := filepath.Join(home, ".cache/huggingface/hub/models--org--m/blobs/abc123")
	peer := srv.Listener.Addr().String()
	if d.Path != blob || d.Name != "model.safetensors" || d.Cache != "huggingface" || d.Peer != peer {
		t.Errorf("download %s (%q in cache %q) from %s; want %s (model.safetensors, huggingface) from %s", d.Path, d.Name, d.Cache, d.Peer, blob, peer)
	}
	if d.Bytes < hubBody || d.Bytes > hubBody+hubBody/100 {
		t.Errorf("%d bytes received, want %d within 1%%", d.Bytes, hubBody)
	}
	if len(d.Files) != 1 || d.Files[0].WrittenPath != blob+".incomplete" || d.Files[0].Gone {
		t.Errorf("files %+v, want the blob written as %s.incomplete", d.Files, blob)
	}
	if d.StartNS+int64(time.Millisecond) < 0 || d.EndNS > cold.rec.WallNS {
		t.Errorf("download span [%d, %d] outside the run [0, %d]", d.StartNS, d.EndNS, cold.rec.WallNS)
	}

	v := cold.res.Verdict
	if v.Kind != attribution.VerdictCold || len(v.Causes) == 0 || v.Causes[0].Category != attribution.Download {
		t.Errorf("verdict %+v: want a cold start led by downloads", v)
	}
	wantVerdict := fmt.Sprintf("downloads (model.safetensors, 64.0 MiB from %s at ", peer)
	for _, want := range []string{"verdict: cold start: ", wantVerdict, "into the huggingface cache: kept for the next run"} {
		if !strings.Contains(cold.text, want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	// The warm estimate leaves the download out: what remains is the
	// client's start and the CPU work it did meanwhile (writing the
	// blob), which a rerun would still do, and under load the waits for a
	// CPU around that work: a quarter of the download's span is left for
	// them, while an estimate that kept the download would be the wall.
	if cold.res.WarmEstimateNS > cold.rec.WallNS-dl*3/4 {
		t.Errorf("warm estimate %v, wall %v: the %v download is not taken out", time.Duration(cold.res.WarmEstimateNS),
			time.Duration(cold.rec.WallNS), time.Duration(dl))
	}

	warm := tracedFetch(t, home, srv.URL+"/org/m/resolve/main/model.safetensors")
	if !warm.client.Skipped {
		t.Fatalf("the rerun did not find the blob: %+v", warm.client)
	}
	if len(warm.rec.Downloads) != 0 || categoryNS(warm.res, attribution.Download) != 0 {
		t.Errorf("the rerun downloaded: %+v", warm.rec.Downloads)
	}
	code, stdout, stderr := coldtrace(t, nil, "diff", cold.recOut, warm.recOut)
	if code != 0 {
		t.Fatalf("diff exited %d: %s", code, stderr)
	}
	t.Logf("diff:\n%s", stdout)
	if !strings.Contains(stdout, "B did not download model.safetensors, 64.0 MiB in ") || !strings.Contains(stdout, "it was in the huggingface cache") {
		t.Errorf("diff does not explain the gap with the download:\n%s", stdout)
	}
}

// TestHubDownloadOnTmpfs: the same fetch with HOME on tmpfs is still a
// download, but the verdict says it happens again after a reboot and the
// warm estimate keeps it.
func TestHubDownloadOnTmpfs(t *testing.T) {
	requireTracing(t)
	srv := hubServer(t)
	home, err := os.MkdirTemp("/dev/shm", "coldtrace-home-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if fs := fsType(t, home); fs != unix.TMPFS_MAGIC {
		t.Skipf("/dev/shm is not tmpfs (f_type %#x)", fs)
	}
	run := tracedFetch(t, home, srv.URL+"/model")
	clientNS := run.client.T1 - run.client.T0
	dl := categoryNS(run.res, attribution.Download)
	t.Logf("client: %v; coldtrace: downloads %v, wall %v, warm estimate %v", time.Duration(clientNS), time.Duration(dl),
		time.Duration(run.rec.WallNS), time.Duration(run.res.WarmEstimateNS))
	if diff := dl - clientNS; diff < -clientNS/10 || diff > clientNS/10 {
		t.Errorf("downloads %v, the client measured %v: want within 10%%", time.Duration(dl), time.Duration(clientNS))
	}
	blob := filepath.Join(home, ".cache/huggingface/hub/models--org--m/blobs/abc123")
	if len(run.rec.Downloads) != 1 || run.rec.Downloads[0].Cache != "huggingface" || run.rec.Downloads[0].Path != blob ||
		run.rec.Downloads[0].Name != "model.safetensors" {
		t.Fatalf("downloads %+v, want one into %s in the huggingface cache", run.rec.Downloads, blob)
	}
	if f, _ := attribution.FateOf(run.rec, run.rec.Downloads[0]); f != attribution.FateVolatile {
		t.Errorf("fate %q, want %q", f, attribution.FateVolatile)
	}
	for _, want := range []string{"verdict: cold start: ", "downloads (model.safetensors, 64.0 MiB from ",
		"into the huggingface cache on tmpfs, lost at reboot: a rerun after a reboot downloads it again"} {
		if !strings.Contains(run.text, want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	if strings.Contains(run.text, "kept for the next run") {
		t.Error("the summary says a download on tmpfs is kept")
	}
	if run.res.WarmEstimateNS < dl {
		t.Errorf("warm estimate %v leaves out the %v download that a rerun repeats", time.Duration(run.res.WarmEstimateNS), time.Duration(dl))
	}
}

// TestPingPongIsNotDownload: a loopback conversation of 64 KiB messages,
// 16 MiB each way, has the large receives of a download but answers in
// kind: downloads stay at 0.
func TestPingPongIsNotDownload(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	if _, err := exec.LookPath(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // echo
				defer c.Close()
				_, _ = io.Copy(c, bufio.NewReaderSize(c, 64<<10))
			}()
		}
	}()
	const msg, rounds = 64 << 10, 256
	script := fmt.Sprintf(`
import socket
s = socket.create_connection(("127.0.0.1", %d))
m = b"x" * %d
for _ in range(%d):
    s.sendall(m)
    n = 0
    while n < len(m):
        n += len(s.recv(len(m) - n))
s.close()
`, ln.Addr().(*net.TCPAddr).Port, msg, rounds)
	out := filepath.Join(t.TempDir(), "run.rec")
	code, _, stderr := coldtrace(t, nil, "-q", "-o", out, "--", python, "-c", script)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	rec := readRecord(t, out)
	if err := invariants.Err(rec); err != nil {
		t.Error(err)
	}
	if len(rec.Downloads) != 0 || categoryNS(attribution.Analyze(rec), attribution.Download) != 0 {
		t.Errorf("a ping-pong of %d MiB each way counted as downloads: %+v", msg*rounds>>20, rec.Downloads)
	}
}

func fsType(t *testing.T, path string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Type)
}

// TestDownloadShapes: downloads made in the other ways clients make them
// come out as downloads within 10% of the client's own timing (for two
// at once, of the union of their spans): two threads at once, an asyncio
// client waiting in epoll_wait, and a child process (curl, by its own
// clock: its start is no download, and took 0.34 s of a 1.96 s span in CI).
func TestDownloadShapes(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	script, err := filepath.Abs("../../testdata/workloads/fetchmany.py")
	if err != nil {
		t.Fatal(err)
	}
	srv := hubServer(t)
	cases := map[string]struct {
		args      []string
		downloads int
		fate      attribution.Fate // what a rerun does: fetch again
		needs     string
	}{
		"two threads": {[]string{"threads", srv.URL + "/a", srv.URL + "/b"}, 2, attribution.FateMemory, ""},
		"asyncio":     {[]string{"asyncio", srv.URL + "/model"}, 1, attribution.FateMemory, ""},
		"curl child": {[]string{"child", "/usr/bin/curl", "-s", "-w", "%{time_total}", "-o", filepath.Join(t.TempDir(), "model.bin"), srv.URL + "/model"},
			1, attribution.FateNoCache, "/usr/bin/curl"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.needs != "" {
				if _, err := os.Stat(tc.needs); err != nil {
					t.Skipf("needs %s", tc.needs)
				}
			}
			out := filepath.Join(t.TempDir(), "run.rec")
			code, stdout, stderr := coldtrace(t, nil, append([]string{"-q", "-o", out, "--", python, script}, tc.args...)...)
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			var lo, hi, own int64
			for i, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
				var r fetchResult
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("client said %q: %v", line, err)
				}
				if i == 0 || r.T0 < lo {
					lo = r.T0
				}
				hi = max(hi, r.T1)
				own = r.OwnNS
			}
			client := hi - lo
			if own > 0 {
				client = own
			}
			rec := readRecord(t, out)
			if err := invariants.Err(rec); err != nil {
				t.Error(err)
			}
			res := attribution.Analyze(rec)
			dl, other := categoryNS(res, attribution.Download), categoryNS(res, attribution.OtherWait)
			t.Logf("client: %v (span %v); coldtrace: downloads %v, other wait %v, wall %v, %d downloads", time.Duration(client), time.Duration(hi-lo),
				time.Duration(dl), time.Duration(other), time.Duration(rec.WallNS), len(rec.Downloads))
			if len(rec.Downloads) != tc.downloads {
				t.Errorf("%d downloads, want %d: %+v", len(rec.Downloads), tc.downloads, rec.Downloads)
			}
			if diff := dl - client; diff < -client/10 || diff > client/10 {
				t.Errorf("downloads %v, the client measured %v: want within 10%%", time.Duration(dl), time.Duration(client))
			}
			if dl > hi-lo {
				t.Errorf("downloads %v, longer than the client's span %v", time.Duration(dl), time.Duration(hi-lo))
			}
			for _, d := range rec.Downloads {
				if d.Bytes < hubBody || d.Bytes > hubBody+hubBody/100 {
					t.Errorf("download from %s: %d bytes, want %d within 1%%", d.Peer, d.Bytes, hubBody)
				}
				if f, _ := attribution.FateOf(rec, d); f != tc.fate {
					t.Errorf("download from %s into %q: fate %q, want %q", d.Peer, d.Path, f, tc.fate)
				}
			}
			// Nothing of it landed in a cache: the estimate keeps it.
			if res.WarmEstimateNS < dl {
				t.Errorf("warm estimate %v leaves out a %v download a rerun repeats", time.Duration(res.WarmEstimateNS), time.Duration(dl))
			}
		})
	}
}
