package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/invariants"
)

// TestTorchHubDownload: Debian's python3-torch fetches a checkpoint with
// torch.hub.download_url_to_file (8 KiB reads into a tempfile beside the
// destination, moved into place) into $TORCH_HOME/hub/checkpoints. It is
// one download, its bytes within 1%, into the torch_hub cache, its time
// within 10% of the client's own clock.
func TestTorchHubDownload(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch.hub").Run(); err != nil {
		t.Skipf("needs torch for %s (Debian: apt-get install python3-torch): %v", python, err)
	}
	script, err := filepath.Abs("../../testdata/workloads/torchfetch.py")
	if err != nil {
		t.Fatal(err)
	}
	srv := hubServer(t)
	torchHome := t.TempDir()
	if fs := fsType(t, torchHome); fs == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs: the test needs a persistent cache", torchHome)
	}
	out := filepath.Join(t.TempDir(), "run.rec")
	code, stdout, stderr := coldtrace(t, []string{"TORCH_HOME=" + torchHome}, "-o", out, "--",
		python, script, srv.URL+"/models/resnet-test.pth", "resnet-test.pth")
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	t.Logf("coldtrace said:\n%s", stderr)
	var client struct {
		Bytes  uint64 `json:"bytes"`
		T0, T1 int64
		Dst    string `json:"dst"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &client); err != nil {
		t.Fatalf("client said %q: %v", stdout, err)
	}
	dst := filepath.Join(torchHome, "hub", "checkpoints", "resnet-test.pth")
	if client.Bytes != hubBody || client.Dst != dst {
		t.Fatalf("client fetched %d bytes into %s, want %d into %s", client.Bytes, client.Dst, hubBody, dst)
	}
	rec := readRecord(t, out)
	if err := invariants.Err(rec); err != nil {
		t.Error(err)
	}
	res := attribution.Analyze(rec)
	clientNS := client.T1 - client.T0
	dl := categoryNS(res, attribution.Download)
	t.Logf("client: %v for %d bytes; coldtrace: downloads %v, other wait %v, wall %v", time.Duration(clientNS), client.Bytes,
		time.Duration(dl), time.Duration(categoryNS(res, attribution.OtherWait)), time.Duration(rec.WallNS))
	d := onlyDownload(t, rec)
	t.Logf("download: %s (cache %q) from %s, %d bytes in %d receives, %d sent, files %+v", d.Path, d.Cache, d.Peer,
		d.Bytes, d.Receives, d.BytesSent, d.Files)
	if d.Bytes < hubBody || d.Bytes > hubBody+hubBody/100 {
		t.Errorf("%d bytes received, want %d within 1%%", d.Bytes, hubBody)
	}
	if d.Path != dst || d.Cache != "torch_hub" || d.Peer != srv.Listener.Addr().String() {
		t.Errorf("download into %s (cache %q) from %s; want %s (torch_hub) from %s", d.Path, d.Cache, d.Peer, dst, srv.Listener.Addr())
	}
	if diff := dl - clientNS; diff < -clientNS/10 || diff > clientNS/10 {
		t.Errorf("downloads %v, the client measured %v: want within 10%%", time.Duration(dl), time.Duration(clientNS))
	}
	if f, _ := attribution.FateOf(rec, d); f != attribution.FateKept {
		t.Errorf("fate %q, want %q: the checkpoint is in a persistent torch hub cache", f, attribution.FateKept)
	}
}

// TestIdleKeepAliveIsNotDownload: a client that keeps an HTTP/1.1
// connection open and idle between small requests (TCP keep-alive probes
// on, 1 s apart) spends most of its run waiting on that socket: download
// stays at 0.
func TestIdleKeepAliveIsNotDownload(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	body := strings.Repeat("k", 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	const requests, idle = 4, 0.7
	script := fmt.Sprintf(`
import http.client, socket, time
c = http.client.HTTPConnection("127.0.0.1", %d)
c.connect()
s = c.sock
s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
for i in range(%d):
    c.request("GET", "/ping")
    r = c.getresponse()
    assert len(r.read()) == 1000
    assert c.sock is s, "the connection was not kept alive"
    time.sleep(%g)
c.close()
`, port, requests, idle)
	out := filepath.Join(t.TempDir(), "run.rec")
	code, _, stderr := coldtrace(t, nil, "-q", "-o", out, "--", python, "-c", script)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	rec := readRecord(t, out)
	if err := invariants.Err(rec); err != nil {
		t.Error(err)
	}
	if rec.WallNS < int64(requests*idle*float64(time.Second)) {
		t.Fatalf("wall %v: the client did not idle", time.Duration(rec.WallNS))
	}
	res := attribution.Analyze(rec)
	t.Logf("wall %v, downloads %v, other wait %v", time.Duration(rec.WallNS), time.Duration(categoryNS(res, attribution.Download)),
		time.Duration(categoryNS(res, attribution.OtherWait)))
	if len(rec.Downloads) != 0 || categoryNS(res, attribution.Download) > 0 {
		t.Errorf("an idle keep-alive connection counted as a download: %+v", rec.Downloads)
	}
}

// TestHubOfflineHealth: a run with HF_HUB_OFFLINE=1 whose model is in a
// Hugging Face cache under HOME reads it there, downloads nothing, and
// the cache's health says the next run cannot download either, in the
// text and in the record.
func TestHubOfflineHealth(t *testing.T) {
	requireTracing(t)
	home := t.TempDir()
	blob := filepath.Join(home, ".cache/huggingface/hub/models--org--m/blobs/abc123")
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../testdata/workloads/hubfetch.py")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run.rec")
	// The URL is never fetched: the blob is there.
	code, _, stderr := coldtrace(t, []string{"HOME=" + home, "HF_HUB_OFFLINE=1"}, "-o", out, "--",
		"/usr/bin/python3", script, "http://127.0.0.1:9/model")
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	t.Logf("coldtrace said:\n%s", stderr)
	rec := readRecord(t, out)
	if len(rec.Downloads) != 0 {
		t.Errorf("downloads %+v", rec.Downloads)
	}
	if rec.JIT == nil {
		t.Fatal("no caches in the record")
	}
	var found bool
	for _, c := range rec.JIT.Caches {
		if c.Name != "huggingface" {
			continue
		}
		found = true
		if c.Offline != "HF_HUB_OFFLINE=1" || c.Disabled != "" || c.Root != filepath.Join(home, ".cache/huggingface/hub") {
			t.Errorf("huggingface cache %+v: want offline by HF_HUB_OFFLINE=1, not disabled", c)
		}
	}
	if !found {
		t.Fatalf("no huggingface cache in %+v", rec.JIT.Caches)
	}
	if want := "HF_HUB_OFFLINE=1: offline, a rerun cannot download: a file missing from the cache fails the run"; !strings.Contains(stderr, want) {
		t.Errorf("the summary lacks %q", want)
	}
}
