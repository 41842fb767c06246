package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/report/words"
)

// wheel is a pure-Python wheel of package name whose blob.bin, size bytes
// of random data, is stored uncompressed: the unpacked member is the
// wheel's size to within a page.
func wheel(t *testing.T, name string, size int) []byte {
	t.Helper()
	blob := make([]byte, size)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	add := func(p string, method uint16, b []byte) {
		w, err := z.CreateHeader(&zip.FileHeader{Name: p, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	info := name + "-1.0.dist-info/"
	add(name+"/__init__.py", zip.Deflate, []byte("VERSION = 1\n"))
	add(name+"/blob.bin", zip.Store, blob)
	add(info+"METADATA", zip.Deflate, []byte("Metadata-Version: 2.1\nName: "+name+"\nVersion: 1.0\n"))
	add(info+"WHEEL", zip.Deflate, []byte("Wheel-Version: 1.0\nGenerator: coldtrace-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
	add(info+"RECORD", zip.Deflate, nil)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pipIndex serves a wheel of package name from a simple index on
// 127.0.0.1, marked cacheable as PyPI marks its files (pip keeps only
// such responses, and from a plain-HTTP index only a trusted host's).
func pipIndex(t *testing.T, name string, whl []byte) string {
	t.Helper()
	whlName := name + "-1.0-py3-none-any.whl"
	sum := sha256.Sum256(whl)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/"+name+"/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, whlName, hex.EncodeToString(sum[:]), whlName)
	})
	mux.HandleFunc("/files/"+whlName, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Cache-Control", "max-age=365000000, immutable, public")
		_, _ = w.Write(whl)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// pipRun installs name from index into a fresh target under coldtrace,
// with HOME home (pip's cache below it) and pip's own arguments extra,
// and returns the record and the summary's broken caches.
func pipRun(t *testing.T, python, index, name, home string, extra ...string) (*record.Record, []string) {
	t.Helper()
	dir := t.TempDir()
	target, tmp := filepath.Join(dir, "target"), filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	out, summary := filepath.Join(dir, "run.rec"), filepath.Join(dir, "summary.json")
	env := []string{"HOME=" + home, "TMPDIR=" + tmp, "PIP_NO_INPUT=1", "XDG_CACHE_HOME=", "PIP_CACHE_DIR="}
	args := append([]string{"-q", "-o", out, "--json", summary, "--", python, "-m", "pip", "install", "-q",
		"--disable-pip-version-check", "--index-url", index + "/simple/", "--target", target}, extra...)
	code, _, stderr := coldtrace(t, env, append(args, name)...)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(target, name, "blob.bin")); err != nil {
		t.Fatalf("pip did not install %s: %v", name, err)
	}
	var broken []string
	for _, c := range readSummary(t, summary).BrokenCaches {
		broken = append(broken, c.Cache)
	}
	return readRecord(t, out), broken
}

func requirePip(t *testing.T, python string) {
	t.Helper()
	if err := exec.Command(python, "-m", "pip", "--version").Run(); err != nil {
		t.Skipf("needs pip for %s (Debian: apt-get install python3-pip): %v", python, err)
	}
}

// cacheAt is rec's cache of that name whose root is root, or nil.
func cacheAt(rec *record.Record, name, root string) *record.Cache {
	if rec.JIT != nil {
		for i, c := range rec.JIT.Caches {
			if c.Name == name && c.Root == root {
				return &rec.JIT.Caches[i]
			}
		}
	}
	return nil
}

// TestPipInstallFromALocalIndex runs a real client no other test was
// written for: pip installs a wheel from an index on 127.0.0.1 into a
// target directory, its cache off (received into a temporary file,
// unpacked into a temporary tree that is compiled and then moved, the
// wheel deleted). The download is the wheel, deleted by the end (a rerun
// downloads it again), not the unpacked member of its size; the bytecode
// pip compiled into the tree it moved is no entry the cache lost, and its
// compile is timed from its own lookup, not from a read of another
// package's __init__; a compiler asked only its version (pip asks rustc
// for its user agent, where rustc is installed) is no compile.
func TestPipInstallFromALocalIndex(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	requirePip(t, python)
	const name = "coldtracepkg"
	whl := wheel(t, name, 8<<20)
	index := pipIndex(t, name, whl)
	rec, broken := pipRun(t, python, index, name, t.TempDir(), "--no-cache-dir")

	d := onlyDownload(t, rec)
	if d.Destination != record.DestFile || filepath.Base(d.Path) != name+"-1.0-py3-none-any.whl" || len(d.Files) == 0 || !d.Files[0].Gone || d.KeptIn != nil {
		t.Errorf("download into %s (%s, files %+v, kept in %+v), want the wheel, deleted by the end", d.Path, d.Destination, d.Files, d.KeptIn)
	}
	if fate, _ := attribution.FateOf(rec, d); fate != attribution.FateDeleted {
		t.Errorf("fate %s, want %s: pip's cache was off", fate, attribution.FateDeleted)
	}
	// As said: a rerun downloads it again.
	again, _ := pipRun(t, python, index, name, t.TempDir(), "--no-cache-dir")
	if a := onlyDownload(t, again); a.Bytes != d.Bytes {
		t.Errorf("the rerun downloaded %d bytes, want the wheel's %d again", a.Bytes, d.Bytes)
	}
	if lo, hi := uint64(len(whl)), uint64(len(whl))+uint64(len(whl))/100; d.Bytes < lo || d.Bytes > hi {
		t.Errorf("download of %d bytes, want the wheel's %d within 1%%", d.Bytes, len(whl))
	}
	// pip is the program: its own frames (not the urllib3 it vendors)
	// are the download's call site.
	if len(d.Connections) == 0 {
		t.Fatalf("a download without connections: %+v", d)
	}
	if f := rec.StackAt(d.Connections[0].Stack).UserFrame(); f == nil || !strings.Contains(f.File, "/pip/") || strings.Contains(f.File, "/_vendor/") {
		t.Errorf("the download's call site %+v, want a frame of pip's own", f)
	}

	py := cacheAt(rec, "python", "**/__pycache__")
	if py == nil || py.EntriesWritten == 0 {
		t.Fatalf("no bytecode written in the __pycache__ directories: %+v", py)
	}
	if py.EntriesGone != 0 || py.EntriesStale != 0 || py.CompileNS > rec.WallNS/4 {
		t.Errorf("python cache: %d of %d entries gone, %d stale, %v of compiles in a %v run: pip moved the tree it compiled",
			py.EntriesGone, py.EntriesWritten, py.EntriesStale, py.CompileNS, rec.WallNS)
	}
	want := "/" + name + "/__pycache__/__init__."
	if !strings.Contains(strings.Join(py.WrittenKeys, "\n"), want) {
		t.Errorf("written keys %q, none of %s's own directory", py.WrittenKeys, name)
	}
	if len(broken) != 0 {
		t.Errorf("caches said not to keep their entries: %q", broken)
	}

	windows := map[int32]bool{}
	for _, w := range rec.JIT.Windows {
		windows[w.PID] = true
	}
	for _, p := range rec.Processes {
		if registry.QueriesOnly(p.Args) && windows[p.PID] {
			t.Errorf("%q compiles nothing, yet has a compile window", p.Args)
		}
	}
}

// TestPipCacheKeepsTheWheel: with its cache on, pip keeps the response it
// received the wheel in (~/.cache/pip/http…, buffered meanwhile in a
// tempfile), while the wheel it unpacked is deleted: the download is the
// wheel, kept in the pip cache, and the rerun, which downloads nothing,
// reads it there: a hit.
func TestPipCacheKeepsTheWheel(t *testing.T) {
	requireTracing(t)
	python := "/usr/bin/python3"
	requirePip(t, python)
	const name = "coldtracecached"
	index := pipIndex(t, name, wheel(t, name, 8<<20))
	home := t.TempDir()
	root := filepath.Join(home, ".cache", "pip")
	cold, _ := pipRun(t, python, index, name, home, "--trusted-host", "127.0.0.1")
	d := onlyDownload(t, cold)
	// The wheel, not the tempfile pip's HTTP cache buffered it in.
	if filepath.Base(d.Path) != name+"-1.0-py3-none-any.whl" {
		t.Errorf("cold: download into %s (files %+v), want the wheel", d.Path, d.Files)
	}
	fate, c := attribution.FateOf(cold, d)
	if fate != attribution.FateKept || c == nil || c.Name != "pip" || d.KeptIn == nil || !strings.HasPrefix(d.KeptIn.Path, root+"/") {
		t.Fatalf("cold: fate %s in %+v, kept in %+v; want kept in pip's cache under %s", fate, c, d.KeptIn, root)
	}
	warm, _ := pipRun(t, python, index, name, home, "--trusted-host", "127.0.0.1")
	if len(warm.Downloads) != 0 {
		t.Errorf("warm: %d downloads, want none: %+v", len(warm.Downloads), warm.Downloads)
	}
	if p := cacheAt(warm, "pip", root); p == nil || p.Hits == 0 {
		t.Errorf("warm: pip cache %+v, want its kept wheel read: a hit", p)
	}
}

// TestGitCloneOverDumbHTTP: git fetches a pack over the dumb HTTP
// protocol into objects/pack/pack-<sha>.pack.temp, then index-pack (a
// child) copies it into pack-<sha>.pack and the temporary file is
// deleted. The download is the pack, first named .pack.temp: a copy under
// the destination's own name on its filesystem is the destination moved.
func TestGitCloneOverDumbHTTP(t *testing.T) {
	requireTracing(t)
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "srv", "repo.git")
	blob := make([]byte, 12<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	gitIn := func(d string, args ...string) {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(work, "init", "-q")
	if err := os.WriteFile(filepath.Join(work, "weights.bin"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(work, "add", "weights.bin")
	gitIn(work, "commit", "-qm", "weights")
	gitIn(dir, "clone", "-q", "--bare", work, bare)
	gitIn(bare, "repack", "-adq")
	gitIn(bare, "update-server-info")
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(dir, "srv"))))
	t.Cleanup(srv.Close)

	clone, out := filepath.Join(dir, "clone"), filepath.Join(dir, "run.rec")
	code, _, stderr := coldtrace(t, []string{"HOME=" + dir}, "-q", "-o", out, "--", gitBin, "clone", "-q", srv.URL+"/repo.git", clone)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(clone, "weights.bin")); err != nil || !bytes.Equal(b, blob) {
		t.Fatalf("git did not clone the weights: %v", err)
	}
	rec := readRecord(t, out)
	var d *record.Download
	for i := range rec.Downloads {
		if rec.Downloads[i].Bytes >= 12<<20 {
			d = &rec.Downloads[i]
		}
	}
	if d == nil {
		t.Fatalf("no download of the pack: %+v", rec.Downloads)
	}
	packDir := filepath.Join(clone, ".git", "objects", "pack")
	if filepath.Dir(d.Path) != packDir || !strings.HasSuffix(d.Path, ".pack") || len(d.Files) == 0 ||
		d.Files[0].Gone || !strings.HasSuffix(d.Files[0].WrittenPath, ".pack.temp") {
		t.Errorf("download into %s (files %+v), want the clone's pack in %s, first named .pack.temp", d.Path, d.Files, packDir)
	}
}

// TestCurlPipedIntoTar: `curl URL | tar -x`, the way model archives are
// often fetched: the body is unpacked as it arrives into several files,
// none of them its size, by another process than the one receiving. The
// download's destination is those files, under the directory they share.
func TestCurlPipedIntoTar(t *testing.T) {
	requireTracing(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("needs curl")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A Hugging Face blob's 64-hex name, a 255-byte name with a space,
	// a small config.
	blobName := "model/blobs/" + strings.Repeat("9f3c", 16)
	longName := "model/tok " + strings.Repeat("k", 255-len("tok "))
	sizes := map[string]int{blobName: 10 << 20, longName: 3 << 20, "model/config.json": 2 << 10}
	for _, name := range []string{blobName, longName, "model/config.json"} {
		b := make([]byte, sizes[name])
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	into, out := filepath.Join(dir, "models"), filepath.Join(dir, "run.rec")
	if err := os.Mkdir(into, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := coldtrace(t, nil, "-q", "-o", out, "--", "sh", "-c",
		fmt.Sprintf("%s -s %s/model.tar | tar -C %s -xf -", curl, srv.URL, into))
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	d := onlyDownload(t, readRecord(t, out))
	if d.Destination != record.DestUnpacked || d.Path != filepath.Join(into, "model") || len(d.Files) < 2 ||
		d.Files[0].Path != filepath.Join(into, blobName) || d.Files[1].Path != filepath.Join(into, longName) {
		t.Errorf("download into %s (%s, files %+v), want unpacked into %s/model, the blob first, then the long name", d.Path, d.Destination, d.Files, into)
	}
}

// TestHTTPSInSmallRecordsNamesTheFile: over HTTPS a connection receives
// more than the body it carries — every TLS record's header and tag, and
// a server that flushes a segment's worth at a time sends records of
// about 1.4 KB (and chunked encoding frames each), 2% more in all, where
// a destination's written bytes were allowed 0.5% less. `go mod download`
// from proxy.golang.org (0.76% more) was "destination not seen": Go
// receives in its connection's goroutine and writes the file from
// another. curl, and Python's urllib on a thread of its own handing the
// body to the thread that writes it, from a TLS server on 127.0.0.1 that
// flushes 1,400 bytes at a time: the file is the destination.
func TestHTTPSInSmallRecordsNamesTheFile(t *testing.T) {
	requireTracing(t)
	const size, segment = 8 << 20, 1400
	body := make([]byte, size)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for b := body; len(b) > 0; b = b[min(segment, len(b)):] {
			if _, err := w.Write(b[:min(segment, len(b))]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	// Received on one thread, written on another (Go's HTTP client
	// reads in its connection's goroutine): no write of the receiving
	// thread names the file.
	fetch := `import queue, ssl, sys, threading, urllib.request
q = queue.Queue()
def receive():
    with urllib.request.urlopen(sys.argv[1], context=ssl._create_unverified_context()) as r:
        while b := r.read(1 << 16):
            q.put(b)
    q.put(None)
threading.Thread(target=receive).start()
with open(sys.argv[2], "wb") as f:
    while (b := q.get()) is not None:
        f.write(b)
`
	clients := map[string]func(url, file string) []string{
		"curl": func(url, file string) []string { return []string{"curl", "-s", "-k", "--http1.1", "-o", file, url} },
		"python, a thread receiving": func(url, file string) []string {
			return []string{"/usr/bin/python3", writeScript(t, t.TempDir(), "fetch.py", fetch), url, file}
		},
	}
	for name, argv := range clients {
		t.Run(name, func(t *testing.T) {
			if _, err := exec.LookPath(argv("", "")[0]); err != nil {
				t.Skipf("needs %s", argv("", "")[0])
			}
			dir := t.TempDir()
			file, out := filepath.Join(dir, "weights.bin"), filepath.Join(dir, "run.rec")
			code, _, stderr := coldtrace(t, nil, append([]string{"-q", "-o", out, "--"}, argv(srv.URL+"/weights.bin", file)...)...)
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, body) {
				t.Fatalf("the client wrote %d bytes (%v), want the %d-byte body", len(got), err, size)
			}
			d := onlyDownload(t, readRecord(t, out))
			t.Logf("received %d bytes for a %d-byte body (%.2f%% more)", d.Bytes, size, 100*float64(d.Bytes-size)/size)
			if d.Bytes <= size+size/100 {
				t.Fatalf("received %d bytes: framing under 1%% of the %d-byte body, not the shape under test", d.Bytes, size)
			}
			if d.Destination != record.DestFile || d.Path != file {
				t.Errorf("destination %s %q, want the file %s", d.Destination, d.Path, file)
			}
		})
	}
}

// TestBodiesInTurnOverOneConnection: huggingface_hub fetches a model's
// files in turn over one kept-alive connection, each into
// blobs/<sha256>.incomplete renamed to its 64-hex blob when done. No one
// file is the connection's body; together they are, under the blobs
// directory, kept in the Hugging Face cache, the largest shard named in
// full.
func TestBodiesInTurnOverOneConnection(t *testing.T) {
	requireTracing(t)
	files := map[string][]byte{"/config.json": nil, "/model-00001-of-00002.safetensors": nil, "/model-00002-of-00002.safetensors": nil}
	for name, size := range map[string]int{"/config.json": 3 << 10, "/model-00001-of-00002.safetensors": 24 << 20, "/model-00002-of-00002.safetensors": 12 << 20} {
		files[name] = make([]byte, size)
		if _, err := rand.Read(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	fetch := `import hashlib, http.client, os, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
repo = os.path.join(os.environ["HF_HUB_CACHE"], "models--org--model")
blobs, snap = os.path.join(repo, "blobs"), os.path.join(repo, "snapshots", "0" * 40)
os.makedirs(blobs); os.makedirs(snap)
conn = http.client.HTTPConnection(u.hostname, u.port)
for name in ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]:
    conn.request("GET", "/" + name)
    resp, h, part = conn.getresponse(), hashlib.sha256(), os.path.join(blobs, name + ".incomplete")
    with open(part, "wb") as f:
        while b := resp.read(1 << 20):
            h.update(b)
            f.write(b)
    os.replace(part, os.path.join(blobs, h.hexdigest()))
    os.symlink(os.path.join("..", "..", "blobs", h.hexdigest()), os.path.join(snap, name))
`
	dir := t.TempDir()
	hub, out := filepath.Join(dir, "hf", "hub"), filepath.Join(dir, "run.rec")
	script := writeScript(t, dir, "fetch.py", fetch)
	code, _, stderr := coldtrace(t, []string{"HF_HUB_CACHE=" + hub}, "-q", "-o", out, "--", "/usr/bin/python3", script, srv.URL)
	if code != 0 {
		t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
	}
	rec := readRecord(t, out)
	d := onlyDownload(t, rec)
	sum := sha256.Sum256(files["/model-00001-of-00002.safetensors"])
	blobs := filepath.Join(hub, "models--org--model", "blobs")
	if d.Destination != record.DestUnpacked || d.Path != blobs || len(d.Files) < 2 || d.Files[0].Path != filepath.Join(blobs, hex.EncodeToString(sum[:])) {
		t.Errorf("download into %s (%s, files %+v, candidates %+v), want its files under %s, the first shard's blob first", d.Path, d.Destination, d.Files, d.Candidates, blobs)
	}
	if fate, c := attribution.FateOf(rec, d); fate != attribution.FateKept || c == nil || c.Name != "huggingface" {
		t.Errorf("fate %s (cache %+v), want kept in the huggingface cache", fate, c)
	}
	if note := words.DestinationNote(d); !strings.Contains(note, "several bodies over one connection") || strings.Contains(note, "expanded") {
		t.Errorf("the downloads table says %q: it names an unpacked archive only, or an expansion where the files hold the body as it came", note)
	}
}
