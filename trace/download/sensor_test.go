package download

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

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	bpfdl "github.com/coldtrace/coldtrace/bpf/download"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/uprobes"
)

const (
	bigBody   = 64 << 20
	smallBody = 1 << 20
	memBody   = 16 << 20
	tinyBody  = 1000
	accepted  = 8 << 20
	chatter   = 6000 // requests of tinyBody: 6 MB in all, over the size limit
	// Headers of one response: the received bytes may exceed the body by
	// this much; over TLS, by 1% (record framing, the handshake).
	headerSlack = 1024
)

// clientResult is one line of testdata/client.py.
type clientResult struct {
	Op    string `json:"op"`
	Bytes uint64 `json:"bytes"`
	T0    uint64 `json:"t0"`
	T1    uint64 `json:"t1"`
	Port  int    `json:"port"`
}

// serve answers, on 127.0.0.1, /big (64 MiB in 1 MiB writes, paced over about 0.6 s,
// like a remote hub), /mem, /small and /tiny.
func serve(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(handler())
	srv.Start() // 127.0.0.1
	t.Cleanup(srv.Close)
	return srv
}

// serve6 is serve on [::1].
func serve6(t *testing.T) *httptest.Server {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	srv := httptest.NewUnstartedServer(handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// serveTLS is serve over HTTPS, with a self-signed certificate.
func serveTLS(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(handler())
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func handler() http.Handler {
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	body := func(w http.ResponseWriter, n int, pace time.Duration) {
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
			if pace > 0 {
				w.(http.Flusher).Flush()
				time.Sleep(pace)
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { body(w, bigBody, 10*time.Millisecond) })
	// 16 MiB at about 200 MB/s: a short download, over between two of a
	// session's 100 ms polls.
	mux.HandleFunc("/short", func(w http.ResponseWriter, _ *http.Request) { body(w, memBody, 5*time.Millisecond) })
	mux.HandleFunc("/mem", func(w http.ResponseWriter, _ *http.Request) { body(w, memBody, 0) })
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) { body(w, smallBody, 0) })
	mux.HandleFunc("/tiny", func(w http.ResponseWriter, _ *http.Request) { body(w, tinyBody, 0) })
	return mux
}

// sharedMaps stands in for the core object: its tracked set and thread
// slots, created from this object's own (identical) declarations.
func sharedMaps(t *testing.T) Options {
	spec, err := bpfdl.LoadDownload()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := ebpf.NewMap(spec.Maps[bpfdl.DownloadMapTaskStates])
	if err != nil {
		t.Fatalf("create task_states: %v", err)
	}
	t.Cleanup(func() { ts.Close() })
	th, err := ebpf.NewMap(spec.Maps[bpfdl.DownloadMapThreads])
	if err != nil {
		t.Fatalf("create threads: %v", err)
	}
	t.Cleanup(func() { th.Close() })
	tr, err := ebpf.NewMap(spec.Maps[bpfdl.DownloadMapTrackedTgids])
	if err != nil {
		t.Fatalf("create tracked_tgids: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	up := uprobes.New(uprobes.Options{})
	t.Cleanup(func() { up.Close() })
	return Options{TaskStates: ts, Threads: th, Tracked: tr, Uprobes: up}
}

// markTracked sets process tgid's bit in the tracked processes' map, as
// the core does before it writes a thread's task storage.
func markTracked(t *testing.T, m *ebpf.Map, tgid uint32) {
	t.Helper()
	var word uint64
	if err := m.Lookup(tgid>>6, &word); err != nil {
		t.Fatalf("tracked bits of %d: %v", tgid, err)
	}
	if err := m.Update(tgid>>6, word|1<<(tgid&63), ebpf.UpdateAny); err != nil {
		t.Fatalf("mark %d tracked: %v", tgid, err)
	}
}

// track puts pid's main thread into the tracked set, in slot 0, the way
// the core seeds the command.
func track(t *testing.T, m Options, pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd: %v", err)
	}
	defer unix.Close(fd)
	s := bpfdl.DownloadTstate{Slot: 0, Tgid: uint32(pid)}
	markTracked(t, m.Tracked, uint32(pid))
	if err := m.TaskStates.Update(uint32(fd), &s, ebpf.UpdateAny); err != nil {
		t.Fatalf("track pid %d: %v", pid, err)
	}
	// The getaddrinfo probes go into traced processes only.
	if m.Uprobes != nil {
		m.Uprobes.Track(int32(pid), false)
	}
}

func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// fileRow is the file table's row of path, named name, as the page-cache
// sensor would make it.
func fileRow(t *testing.T, path, name string) record.File {
	k := fileKey(t, path)
	return record.File{Dev: k.Dev, Ino: k.Ino, Gen: k.Gen, Path: name}
}

func TestDownloadsOfATracedClient(t *testing.T) {
	testenv.RequireTracing(t)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("enable bpf_stats: %v", err)
	}
	defer stats.Close()

	srv, tlsSrv, srv6 := serve(t), serveTLS(t), serve6(t)
	// A Hugging Face hub layout: the snapshot's link exists before its
	// blob, which the client writes under a temporary name.
	hub := filepath.Join(t.TempDir(), "hub", "models--org--m")
	blob := filepath.Join(hub, "blobs", "abc123")
	link := filepath.Join(hub, "snapshots", "rev1", "model.safetensors")
	for _, d := range []string{filepath.Dir(blob), filepath.Dir(link)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../blobs/abc123", link); err != nil {
		t.Fatal(err)
	}

	s, shared := startSensor(t)

	stopPolls, polled := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if err := s.Poll(monotonicNS(), nil); err != nil {
					polled <- err
					return
				}
			case <-stopPolls:
				polled <- nil
				return
			}
		}
	}()
	// The fetch into the cache looks its server up by name.
	byName := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	results, pid := runClient(t, shared,
		"get:"+byName+"/big:"+blob,
		"mem:"+tlsSrv.URL+"/mem",
		"mem:"+srv.URL+"/small",
		"mem:"+srv6.URL+"/mem",
		fmt.Sprintf("chatter:%s/tiny:%d", srv.URL, chatter),
		"accept")

	close(stopPolls)
	if err := <-polled; err != nil {
		t.Fatal(err)
	}
	// The core's file table names the blob by the name its pages were
	// first inserted under.
	rec := &record.Record{Files: []record.File{fileRow(t, blob, blob+".incomplete")},
		JIT: &record.JIT{Caches: []record.Cache{{Name: "huggingface", Root: filepath.Dir(hub)}}}}
	s.Begin(results.startMono)
	if err := s.Finish(rec); err != nil {
		t.Fatal(err)
	}
	logCost(t, s)
	for _, d := range rec.Downloads {
		t.Logf("download: %s %d bytes in %d receives, %d sent, %.1f MB/s, %s, on CPU %v, waiting %v",
			d.Peer, d.Bytes, d.Receives, d.BytesSent, d.MBPerSecond(), d.Path, time.Duration(d.OnCPUNS), time.Duration(d.WaitNS))
	}
	for _, w := range rec.Warnings {
		t.Errorf("warning: %s", w)
	}

	if len(results.ops["get"]) != 1 || len(results.ops["mem"]) != 3 || len(results.ops["chatter"]) != 1 || len(results.ops["accept"]) != 1 {
		t.Fatalf("client results: %+v", results.ops)
	}
	if r := results.ops["accept"][0]; r.Bytes != accepted {
		t.Errorf("the accepted connection carried %d bytes, want %d", r.Bytes, accepted)
	}
	if r := results.ops["chatter"][0]; r.Bytes != chatter*tinyBody {
		t.Errorf("chatter carried %d bytes, want %d", r.Bytes, chatter*tinyBody)
	}
	// Only the 64 MiB fetch to the cache and the 16 MiB ones to memory
	// (over HTTPS, over IPv6) are downloads: not the 1 MiB fetch, the
	// keep-alive chatter (6 MB in small answers), nor the accepted
	// connection.
	if len(rec.Downloads) != 3 {
		t.Fatalf("got %d downloads, want 3: %+v", len(rec.Downloads), rec.Downloads)
	}
	want := []struct {
		res   clientResult
		body  uint64
		path  string
		peer  string
		host  string
		slack uint64
	}{
		{results.ops["get"][0], bigBody, blob, srv.Listener.Addr().String(), "localhost", headerSlack},
		{results.ops["mem"][0], memBody, "", tlsSrv.Listener.Addr().String(), "", memBody / 100},
		{results.ops["mem"][2], memBody, "", srv6.Listener.Addr().String(), "", headerSlack},
	}
	for i, w := range want {
		d := rec.Downloads[i]
		if d.Peer != w.peer || d.Host != w.host {
			t.Errorf("download %d: peer %s (host %q), want %s (host %q)", i, d.Peer, d.Host, w.peer, w.host)
		}
		if d.Bytes < w.body || d.Bytes > w.body+w.slack {
			t.Errorf("download %d: %d bytes received, want %d plus at most %d", i, d.Bytes, w.body, w.slack)
		}
		if d.PID != int32(pid) || d.TID != int32(pid) {
			t.Errorf("download %d: pid %d tid %d, want %d", i, d.PID, d.TID, pid)
		}
		// Inside the client's own interval (same clock: CLOCK_MONOTONIC).
		first, last := uint64(d.StartNS+int64(results.startMono)), uint64(d.EndNS+int64(results.startMono))
		if first < w.res.T0 || last > w.res.T1 || last <= first {
			t.Errorf("download %d: bytes from %d to %d, outside the client's interval [%d, %d]", i, first, last, w.res.T0, w.res.T1)
		}
		if d.Path != w.path {
			t.Errorf("download %d: path %q, want %q", i, d.Path, w.path)
		}
	}
	d := rec.Downloads[0]
	// The paced fetch: its span is the client's own, less the request's
	// round trip before the first byte.
	if span, client := d.EndNS-d.StartNS, int64(want[0].res.T1-want[0].res.T0); float64(span) < 0.9*float64(client) {
		t.Errorf("download span %v, client measured %v: want within 10%%", time.Duration(span), time.Duration(client))
	}
	// Polled every 50 ms through about 0.6 s: the timeline sees it arrive.
	var sum uint64
	for _, p := range d.Samples {
		sum += p.Bytes
		if p.EndNS < d.StartNS || p.EndNS > d.EndNS {
			t.Errorf("sample at %d outside the download [%d, %d]", p.EndNS, d.StartNS, d.EndNS)
		}
	}
	if sum != d.Bytes || len(d.Samples) < 5 {
		t.Errorf("%d samples summing to %d bytes, want at least 5 summing to %d", len(d.Samples), sum, d.Bytes)
	}
	if d.Name != "model.safetensors" || d.Cache != "huggingface" {
		t.Errorf("download name %q in cache %q, want the snapshot's model.safetensors in huggingface", d.Name, d.Cache)
	}
	if len(d.Files) != 1 || d.Files[0].WrittenPath != blob+".incomplete" || d.Files[0].Gone {
		t.Errorf("download files: %+v", d.Files)
	} else if b := d.Files[0].BytesWritten; b < bigBody || b > bigBody+uint64(os.Getpagesize()) {
		t.Errorf("the blob was written %d bytes, want %d", b, bigBody)
	}
}

type clientRun struct {
	ops       map[string][]clientResult
	startMono uint64
}

// runClient runs testdata/client.py with ops, tracked from before its
// first operation, and returns its results and its pid.
func runClient(t *testing.T, shared Options, ops ...string) (clientRun, int) {
	t.Helper()
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	cmd := exec.Command(python, append([]string{"testdata/client.py"}, ops...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	track(t, shared, cmd.Process.Pid)
	run := clientRun{ops: map[string][]clientResult{}, startMono: monotonicNS()}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var r clientResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("client said %q: %v", sc.Text(), err)
		}
		if r.Port != 0 {
			// A connection the traced process accepts: 8 MiB in large
			// writes, which is not a download of its own.
			go sendTo(t, r.Port, accepted)
			continue
		}
		run.ops[r.Op] = append(run.ops[r.Op], r)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client: %v", err)
	}
	return run, cmd.Process.Pid
}

// sendTo connects to the traced client's listener and sends n bytes.
func sendTo(t *testing.T, port, n int) {
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Errorf("dial the client: %v", err)
		return
	}
	defer c.Close()
	buf := make([]byte, 256<<10)
	for n > 0 {
		k := min(n, len(buf))
		if _, err := c.Write(buf[:k]); err != nil {
			t.Errorf("send to the client: %v", err)
			return
		}
		n -= k
	}
}

// logCost reports each program's mean run time per event (bpf_stats);
// the counts include every untraced socket receive and insertion on the
// machine, which is the cost that matters for them.
func logCost(t *testing.T, s *Sensor) {
	var parts []string
	for name, p := range s.Programs() {
		st, err := p.Stats()
		if err != nil {
			t.Errorf("stats of %s: %v", name, err)
			continue
		}
		if st.RunCount > 0 {
			parts = append(parts, fmt.Sprintf("%s %d runs, %.0f ns/run", name, st.RunCount, float64(st.Runtime.Nanoseconds())/float64(st.RunCount)))
		}
	}
	t.Logf("bpf_stats: %s", strings.Join(parts, "; "))
}

// Downloads by the common command-line clients, whose receive sizes are
// their own: curl reads up to 100 KB at a time, wget 8 KiB (under the
// 16 KiB mean receive: a download by its asymmetry).
func TestDownloadsOfCommandLineClients(t *testing.T) {
	testenv.RequireTracing(t)
	srv := serve(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	clients := map[string]string{
		"curl": "/usr/bin/curl,-s,-o,%s,%s",
		"wget": "/usr/bin/wget,-q,-O,%s,%s",
	}
	for name, args := range clients {
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat("/usr/bin/" + name); err != nil {
				t.Skipf("needs /usr/bin/%s", name)
			}
			shared := sharedMaps(t)
			s, err := Prepare(shared)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			dest := filepath.Join(t.TempDir(), "model.bin")
			run, pid := runClient(t, shared, "exec:"+fmt.Sprintf(args, dest, srv.URL+"/big"))
			rec := &record.Record{Files: []record.File{fileRow(t, dest, dest)}}
			s.Begin(run.startMono)
			if err := s.Finish(rec); err != nil {
				t.Fatal(err)
			}
			if len(rec.Downloads) != 1 {
				t.Fatalf("got %d downloads, want 1: %+v", len(rec.Downloads), rec.Downloads)
			}
			d := rec.Downloads[0]
			t.Logf("download: %s %d bytes in %d receives (%d bytes each), %.1f MB/s, %s",
				d.Peer, d.Bytes, d.Receives, d.Bytes/d.Receives, d.MBPerSecond(), d.Path)
			if d.Peer != fmt.Sprintf("127.0.0.1:%d", port) || d.PID != int32(pid) || d.Path != dest || d.Name != "model.bin" {
				t.Errorf("download: %+v", d)
			}
			if d.Bytes < bigBody || d.Bytes > bigBody+headerSlack {
				t.Errorf("%d bytes received, want %d plus headers", d.Bytes, bigBody)
			}
		})
	}
}
