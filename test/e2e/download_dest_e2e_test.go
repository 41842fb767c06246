package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
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

// The bodies the destination tests fetch, and how the server paces them:
// a piece every few milliseconds, so each download spans several polls.
const (
	poolBody   = 24 << 20
	chunkBody  = 2 << 20
	chunkCount = 8
	memBody    = 16 << 20
	gzExpanded = 32 << 20
	servePiece = 256 << 10
	servePace  = 10 * time.Millisecond
)

// bodyServer serves bodies on 127.0.0.1 over a bare protocol: the client
// sends a name and a newline; the server sends that body and closes. The
// bytes a client receives are then exactly the body's.
func bodyServer(t *testing.T, bodies map[string][]byte) string {
	t.Helper()
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
			go serveBody(c, bodies)
		}
	}()
	return ln.Addr().String()
}

func serveBody(c net.Conn, bodies map[string][]byte) {
	defer c.Close()
	name, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	body := bodies[strings.TrimSpace(name)]
	for off := 0; off < len(body); off += servePiece {
		if _, err := c.Write(body[off:min(off+servePiece, len(body))]); err != nil {
			return
		}
		time.Sleep(servePace)
	}
}

// seeded is n bytes that do not compress, the same in every run.
func seeded(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	_, _ = r.Read(b)
	return b
}

// compressible is n bytes that gzip to about a quarter: in each 4 KiB,
// 1 KiB that does not compress and 3 KiB of zeros.
func compressible(n int) []byte {
	b := make([]byte, n)
	noise := seeded(n/4, 7)
	for i := 0; i*4096 < n; i++ {
		copy(b[i*4096:i*4096+1024], noise[i*1024:])
	}
	return b
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// destResult is what testdata/workloads/destshapes.py prints.
type destResult struct {
	Received uint64 `json:"received"`
	Written  uint64 `json:"written"`
	Path     string `json:"path"`
	T0       int64  `json:"t0"`
	T1       int64  `json:"t1"`
}

type destRun struct {
	client destResult
	rec    *record.Record
	res    *attribution.Result
	text   string
}

// tracedShape runs destshapes.py with args under coldtrace, with HOME=home
// and env, and checks the record's invariants.
func tracedShape(t *testing.T, home string, env []string, args ...string) destRun {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	script, err := filepath.Abs("../../testdata/workloads/destshapes.py")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run.rec")
	code, stdout, stderr := coldtrace(t, append([]string{"HOME=" + home}, env...), append([]string{"-o", out, "--", python, script}, args...)...)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	var run destRun
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &run.client); err != nil {
		t.Fatalf("client said %q: %v", stdout, err)
	}
	run.rec, run.text = readRecord(t, out), stderr
	if err := invariants.Err(run.rec); err != nil {
		t.Error(err)
	}
	run.res = attribution.Analyze(run.rec)
	t.Logf("coldtrace said:\n%s", stderr)
	for _, d := range run.rec.Downloads {
		t.Logf("download: %d bytes over %d connections into %q (%s, %.2f×), files %+v, candidates %+v",
			d.Bytes, len(d.Connections), d.Path, d.Destination, d.Expansion, d.Files, d.Candidates)
	}
	return run
}

// oneDownload is the run's only download, checked to lie inside the run
// and to last no longer than the client's own span.
func oneDownload(t *testing.T, run destRun) record.Download {
	t.Helper()
	if len(run.rec.Downloads) != 1 {
		t.Fatalf("%d downloads, want 1: %+v", len(run.rec.Downloads), run.rec.Downloads)
	}
	d := run.rec.Downloads[0]
	if d.StartNS < 0 || d.EndNS > run.rec.WallNS || d.EndNS <= d.StartNS || d.EndNS-d.StartNS > run.client.T1-run.client.T0 {
		t.Errorf("download span [%d, %d]: want inside the run [0, %d] and no longer than the client's %d ns", d.StartNS, d.EndNS,
			run.rec.WallNS, run.client.T1-run.client.T0)
	}
	return d
}

func persistentHome(t *testing.T) string {
	home := t.TempDir()
	if fsType(t, home) == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs: the test needs a persistent cache", home)
	}
	return home
}

// TestPoolDownloadIsLinkedToItsRenamedBlob: the main thread receives, a
// pool of 4 threads writes each piece at its offset into
// blobs/<sha>.incomplete in a staging directory, and the file is renamed
// into the Hugging Face cache as blobs/<64-hex sha>. The download is that
// blob, under its final name with its first beside it, and kept: the
// next run does not fetch it again.
func TestPoolDownloadIsLinkedToItsRenamedBlob(t *testing.T) {
	requireTracing(t)
	body := seeded(poolBody, 1)
	sum := sha256.Sum256(body)
	sha := hex.EncodeToString(sum[:])
	addr := bodyServer(t, map[string][]byte{"pool": body})
	home := persistentHome(t)
	stage, hub := filepath.Join(home, "staging"), filepath.Join(home, ".cache/huggingface/hub")
	run := tracedShape(t, home, []string{"BODY_SHA256=" + sha}, "pool", addr, "pool", stage, hub)
	blob := filepath.Join(hub, "models--org--m/blobs", sha)
	if run.client.Received != poolBody || run.client.Path != blob {
		t.Fatalf("client: %+v", run.client)
	}
	d := oneDownload(t, run)
	if d.Bytes != poolBody || len(d.Connections) != 1 || d.Connections[0].Peer != addr || d.Peer != addr {
		t.Errorf("download of %d bytes over %+v, want %d over one connection to %s", d.Bytes, d.Connections, poolBody, addr)
	}
	if d.Destination != record.DestFile || d.Path != blob || d.Name != "model.safetensors" || d.Cache != "huggingface" {
		t.Errorf("destination %s %q (%q in cache %q), want file %s (model.safetensors, huggingface)", d.Destination, d.Path, d.Name, d.Cache, blob)
	}
	first := filepath.Join(stage, "blobs", sha+".incomplete")
	if len(d.Files) == 0 || d.Files[0].Path != blob || d.Files[0].WrittenPath != first || d.Files[0].BytesWritten != poolBody ||
		d.Files[0].Gone || d.Files[0].NameUnknown {
		t.Errorf("files %+v, want %s first, written as %s, %d bytes", d.Files, blob, first, poolBody)
	}
	if f, _ := attribution.FateOf(run.rec, d); f != attribution.FateKept {
		t.Errorf("fate %q, want kept", f)
	}
	checkFinalName(t, run.rec, blob, first)
	if strings.Contains(run.text, "fetched again") || strings.Contains(run.text, "downloads it again") {
		t.Errorf("the summary says the kept blob is fetched again")
	}
	if !strings.Contains(run.text, "kept (huggingface cache)") {
		t.Errorf("the downloads table does not say the blob is kept")
	}
	dl := categoryNS(run.res, attribution.Download)
	if dl <= 0 || run.res.WarmEstimateNS > run.rec.WallNS-dl*3/4 {
		t.Errorf("warm estimate %v, wall %v: the %v download is not taken out", time.Duration(run.res.WarmEstimateNS),
			time.Duration(run.rec.WallNS), time.Duration(dl))
	}
}

// checkFinalName checks that the record's file table names the file at
// path by that name, with first, its name when the run created it,
// beside it.
func checkFinalName(t *testing.T, rec *record.Record, path, first string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	for _, f := range rec.Files {
		if f.Ino == st.Ino {
			if f.Path != path || f.FirstPath != first || f.SizeBytes != st.Size {
				t.Errorf("files[] names it %q (first %q, %d bytes), want %s (first %s, %d bytes)", f.Path, f.FirstPath, f.SizeBytes,
					path, first, st.Size)
			}
			return
		}
	}
	t.Errorf("files[] lacks %s", path)
}

// TestChunkedDownloadIsOneDownload: 8 connections each fetch 2 MiB and
// write it at its offset into one file: one 16 MiB download of 8
// connections, though no connection alone is a download, timed from the
// first connection's first byte to the last one's last.
func TestChunkedDownloadIsOneDownload(t *testing.T) {
	requireTracing(t)
	addr := bodyServer(t, map[string][]byte{"chunk": seeded(chunkBody, 2)})
	home := persistentHome(t)
	out := filepath.Join(home, "model.bin")
	run := tracedShape(t, home, nil, "chunks", addr, "chunk", strconv.Itoa(chunkCount), strconv.Itoa(chunkBody), out)
	if run.client.Received != chunkCount*chunkBody {
		t.Fatalf("client: %+v", run.client)
	}
	d := oneDownload(t, run)
	if d.Bytes != chunkCount*chunkBody || len(d.Connections) != chunkCount {
		t.Errorf("download of %d bytes over %d connections, want %d over %d", d.Bytes, len(d.Connections), chunkCount*chunkBody, chunkCount)
	}
	var sum uint64
	for _, c := range d.Connections {
		sum += c.Bytes
		if c.Bytes != chunkBody || c.Peer != addr || c.StartNS < d.StartNS || c.EndNS > d.EndNS {
			t.Errorf("connection %+v: want %d bytes from %s inside [%d, %d]", c, chunkBody, addr, d.StartNS, d.EndNS)
		}
	}
	if d.Destination != record.DestFile || d.Path != out || len(d.Files) == 0 || d.Files[0].BytesWritten != chunkCount*chunkBody {
		t.Errorf("destination %s %q, files %+v; want file %s written %d bytes", d.Destination, d.Path, d.Files, out, chunkCount*chunkBody)
	}
	var samples uint64
	for _, s := range d.Samples {
		samples += s.Bytes
	}
	if samples != d.Bytes {
		t.Errorf("samples sum to %d bytes, want %d", samples, d.Bytes)
	}
}

// TestBodyKeptInMemory: a body never written is "kept in memory", and a
// rerun fetches it again.
func TestBodyKeptInMemory(t *testing.T) {
	requireTracing(t)
	addr := bodyServer(t, map[string][]byte{"mem": seeded(memBody, 3)})
	run := tracedShape(t, persistentHome(t), nil, "memory", addr, "mem")
	d := oneDownload(t, run)
	if d.Bytes != memBody || d.Destination != record.DestMemory || d.Path != "" || len(d.Connections) != 1 {
		t.Errorf("download of %d bytes into %s %q over %d connections, want %d kept in memory over 1", d.Bytes, d.Destination, d.Path,
			len(d.Connections), memBody)
	}
	if f, _ := attribution.FateOf(run.rec, d); f != attribution.FateMemory {
		t.Errorf("fate %q, want memory", f)
	}
	if !strings.Contains(run.text, "(kept in memory)") || !strings.Contains(run.text, "fetched again (kept in memory)") {
		t.Errorf("the downloads table does not say the body was kept in memory")
	}
}

// TestGzipDownloadIsExpanded: a gzip body decompressed as it arrives is
// the destination "expanded N×", N the written bytes over the received.
func TestGzipDownloadIsExpanded(t *testing.T) {
	requireTracing(t)
	gz := gzipped(t, compressible(gzExpanded))
	addr := bodyServer(t, map[string][]byte{"gz": gz})
	home := persistentHome(t)
	out := filepath.Join(home, "model.bin")
	run := tracedShape(t, home, nil, "gunzip", addr, "gz", out)
	if run.client.Received != uint64(len(gz)) || run.client.Written != gzExpanded {
		t.Fatalf("client: %+v (gzip body %d bytes)", run.client, len(gz))
	}
	d := oneDownload(t, run)
	want := float64(gzExpanded) / float64(len(gz))
	if d.Bytes != uint64(len(gz)) || d.Destination != record.DestExpanded || d.Path != out || d.Expansion != want {
		t.Errorf("download of %d bytes into %s %q (%.3f×), want %d expanded %.3f× into %s", d.Bytes, d.Destination, d.Path, d.Expansion,
			len(gz), want, out)
	}
	if len(d.Files) == 0 || d.Files[0].BytesWritten != gzExpanded {
		t.Errorf("files %+v, want %s first, written %d bytes", d.Files, out, gzExpanded)
	}
	if !strings.Contains(run.text, "expanded "+strconv.FormatFloat(want, 'f', 1, 64)+"×") {
		t.Errorf("the downloads table does not say the body was expanded %.1f×", want)
	}
}
