package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/report/metrics"
)

// freeLoopbackAddr returns a 127.0.0.1 address no one listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startServer starts a real server binary and stops it at cleanup.
func startServer(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	logf, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(name)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s log:\n%s", name, lastLines(string(b), 20))
		}
		logf.Close()
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitReady polls url until it answers 200, for at most d.
func waitReady(t *testing.T, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v (last error %v)", url, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promSample is one series of a Prometheus instant query.
type promSample struct {
	labels map[string]string
	value  float64
}

// promQuery runs an instant query against Prometheus's HTTP API.
func promQuery(t *testing.T, base, query string) []promSample {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s %s", query, body.Status, body.Error)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v: %v", query, r.Value, err)
		}
		out = append(out, promSample{labels: r.Metric, value: v})
	}
	return out
}

// byHost maps each series of a query to its host label.
func byHost(samples []promSample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		out[s.labels["host"]] = s.value
	}
	return out
}

// Two traced runs, node1 cold (its file evicted) and node2 warm, push to
// a real Pushgateway that a real Prometheus scrapes; Prometheus's HTTP
// API must then hold both runs with the values of their JSON summaries.
func TestPushToRealPrometheus(t *testing.T) {
	requireTracing(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (apt-get install prometheus prometheus-pushgateway)")
	}
	pgwBin, err := exec.LookPath("prometheus-pushgateway")
	if err != nil {
		if pgwBin, err = exec.LookPath("pushgateway"); err != nil {
			t.Skip("the Pushgateway is not installed (apt-get install prometheus-pushgateway)")
		}
	}
	pgwAddr, promAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
	startServer(t, pgwBin, "--web.listen-address="+pgwAddr, "--persistence.file=")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	err = os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 500ms
  evaluation_interval: 500ms
scrape_configs:
  - job_name: pushgateway
    honor_labels: true
    static_configs:
      - targets: ['%s']
`, pgwAddr)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	startServer(t, promBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr)
	pgwURL, promURL := "http://"+pgwAddr, "http://"+promAddr
	waitReady(t, pgwURL+"/-/ready", 30*time.Second)
	waitReady(t, promURL+"/-/ready", 60*time.Second)

	path := e2eutil.EvictableFile(t, 64<<20)
	reader := []string{"dd", "if=" + path, "of=/dev/null", "bs=1M", "status=none"}
	runNode := func(host string) summaryJSON {
		out := filepath.Join(t.TempDir(), host+".json")
		args := append([]string{"-q", "--json", out, "--push", pgwURL, "--label", "host=" + host,
			"--label", "job=coldtrace_e2e", "--label", "model=test", "--"}, reader...)
		code, _, stderr := coldtrace(t, nil, args...)
		if code != 0 || strings.Contains(stderr, "warning") {
			t.Fatalf("%s: exit %d: %s", host, code, stderr)
		}
		return readSummary(t, out)
	}
	cold := runNode("node1")
	e2eutil.WarmUp(t, path)
	warm := runNode("node2")
	// A warm dd of 64 MiB takes milliseconds, so a few pages paged out
	// since the warm-up (DAMON takes idle file pages back: the file's, or
	// dd's own) are a tenth of it and make it a cold start (seen in CI:
	// 1.2 ms of disk reads). Such a run is repeated after another
	// warm-up; its push replaces the group.
	for i := 0; i < 3 && warm.category("disk_read") > 0; i++ {
		t.Logf("the warm run read from disk for %v; warming up and running it again", time.Duration(warm.category("disk_read")))
		e2eutil.WarmUp(t, path)
		warm = runNode("node2")
	}
	sums := map[string]summaryJSON{"node1": cold, "node2": warm}

	// Until Prometheus has scraped both runs' last pushes.
	query := `coldtrace_run_category_seconds{job="coldtrace_e2e",category="disk_read"}`
	var disk map[string]float64
	deadline := time.Now().Add(60 * time.Second)
	for {
		disk = byHost(promQuery(t, promURL, query))
		scraped := len(disk) == 2
		for host, s := range sums {
			scraped = scraped && disk[host] == float64(s.category("disk_read"))/1e9
		}
		if scraped || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(disk) != 2 {
		t.Fatalf("Prometheus has %v for %s after 60s, want node1 and node2", disk, query)
	}
	t.Logf("disk_read seconds in Prometheus: node1 %v, node2 %v", disk["node1"], disk["node2"])
	if !(disk["node1"] > disk["node2"]) {
		t.Errorf("node1 (cold) disk_read %v s is not above node2 (warm) %v s", disk["node1"], disk["node2"])
	}
	for host, s := range sums {
		if want := float64(s.category("disk_read")) / 1e9; disk[host] != want {
			t.Errorf("%s: Prometheus disk_read %v, JSON summary %v", host, disk[host], want)
		}
	}
	wall := byHost(promQuery(t, promURL, `coldtrace_run_wall_seconds{job="coldtrace_e2e"}`))
	for host, s := range sums {
		if want := float64(s.WallNS) / 1e9; wall[host] != want {
			t.Errorf("%s: Prometheus wall %v, JSON summary %v", host, wall[host], want)
		}
	}
	// The README's queries.
	closeTo := func(a, b float64) bool { d := a - b; return d < 1e-9*max(1, b) && -d < 1e-9*max(1, b) }
	wantShare := float64(cold.category("disk_read")+warm.category("disk_read")) / float64(cold.WallNS+warm.WallNS)
	share := promQuery(t, promURL, `sum by (job) (coldtrace_run_category_seconds{job="coldtrace_e2e",category="disk_read"}) / sum by (job) (coldtrace_run_wall_seconds{job="coldtrace_e2e"})`)
	if len(share) != 1 || !closeTo(share[0].value, wantShare) {
		t.Errorf("disk-read share %v, JSON summaries give %v", share, wantShare)
	}
	if top := promQuery(t, promURL, `topk(1, coldtrace_run_category_seconds{job="coldtrace_e2e", category="disk_read"})`); len(top) != 1 || top[0].labels["host"] != "node1" {
		t.Errorf("rank with the most disk reads: %v, want node1", top)
	}
	slowest := "node1"
	if warm.WallNS > cold.WallNS {
		slowest = "node2"
	}
	if top := promQuery(t, promURL, `topk(1, coldtrace_run_wall_seconds{job="coldtrace_e2e"})`); len(top) != 1 || top[0].labels["host"] != slowest {
		t.Errorf("slowest rank: %v, want %s", top, slowest)
	}
	gap := promQuery(t, promURL, `max(coldtrace_run_wall_seconds{job="coldtrace_e2e"}) - quantile(0.5, coldtrace_run_wall_seconds{job="coldtrace_e2e"})`)
	w1, w2 := float64(cold.WallNS)/1e9, float64(warm.WallNS)/1e9
	if want := (max(w1, w2) - min(w1, w2)) / 2; len(gap) != 1 || !closeTo(gap[0].value, want) {
		t.Errorf("slowest minus median: %v, want %v (the median of two interpolates)", gap, want)
	}
	t.Logf("disk-read share %.3f; slowest %s", wantShare, slowest)

	// Each run is its own group: instance from the host label.
	for _, s := range promQuery(t, promURL, `coldtrace_run_cold{job="coldtrace_e2e"}`) {
		if s.labels["instance"] != s.labels["host"] || s.labels["model"] != "test" {
			t.Errorf("series labels %v: want instance = host and model=test", s.labels)
		}
		want := 0.0
		if s.labels["host"] == "node1" {
			want = 1
		}
		if s.value != want {
			t.Errorf("%s: cold %v, want %v", s.labels["host"], s.value, want)
		}
	}
	if c := promQuery(t, promURL, `coldtrace_run_cold{job="coldtrace_e2e"} == 1`); len(c) != 1 || c[0].labels["host"] != "node1" {
		t.Errorf("ranks that started cold: %v, want node1", c)
	}

	// node1 again, warm now: its group is replaced, not joined.
	again := runNode("node1")
	want := float64(again.WallNS) / 1e9
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		wall = byHost(promQuery(t, promURL, `coldtrace_run_wall_seconds{job="coldtrace_e2e"}`))
		if wall["node1"] == want || time.Now().After(deadline) {
			break
		}
	}
	if wall["node1"] != want || len(wall) != 2 {
		t.Errorf("after node1's second run Prometheus has %v, want node1 = %v and node2", wall, want)
	}
	if n := pushgatewayGroups(t, pgwURL); n != 2 {
		t.Errorf("the Pushgateway holds %d groups, want 2 (one per instance)", n)
	}
}

// pushgatewayGroups counts the groups the Pushgateway holds.
func pushgatewayGroups(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("pushgateway /api/v1/metrics: %v", err)
	}
	return len(body.Data)
}

func parseTextfile(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("textfile does not parse: %v\n%s", err, b)
	}
	return fams
}

func categoryValue(fams map[string]*dto.MetricFamily, category string) (float64, bool) {
	f := fams[metrics.Prefix+"category_seconds"]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == "category" && l.GetValue() == category {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// --prom-textfile writes a file Prometheus's parser reads, with the JSON
// summary's values, and a second run replaces it atomically: a reader
// polling the file meanwhile never sees a partial file.
func TestPromTextfile(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	run := func(label string) summaryJSON {
		out := filepath.Join(t.TempDir(), "s.json")
		code, _, stderr := coldtrace(t, nil, "-q", "--json", out, "--prom-textfile", dir,
			"--label", "host=node1", "--label", "rank="+label, "--label", "instance=trainer", "--", "sh", "-c", "head -c 4000000 /dev/zero | md5sum >/dev/null")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		return readSummary(t, out)
	}
	name := filepath.Join(dir, "coldtrace_coldtrace_trainer.prom")
	s1 := run("0")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("textfile: %v", err)
	}
	fams := parseTextfile(t, b)
	for _, row := range s1.Breakdown {
		if got, ok := categoryValue(fams, row.Category); !ok || got != float64(row.NS)/1e9 {
			t.Errorf("%s: textfile %v, JSON %v", row.Category, got, float64(row.NS)/1e9)
		}
	}
	var st1 syscall.Stat_t
	if err := syscall.Stat(name, &st1); err != nil {
		t.Fatal(err)
	}

	var reads, bad atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(name)
			p := expfmt.NewTextParser(model.LegacyValidation)
			if _, perr := p.TextToMetricFamilies(bytes.NewReader(b)); err != nil || perr != nil || len(b) == 0 {
				bad.Add(1)
			}
			reads.Add(1)
		}
	}()
	s2 := run("1")
	close(stop)
	wg.Wait()
	t.Logf("%d reads of the textfile during the second run, %d partial or missing", reads.Load(), bad.Load())
	if bad.Load() != 0 {
		t.Errorf("%d of %d reads saw a missing or partial file", bad.Load(), reads.Load())
	}
	var st2 syscall.Stat_t
	if err := syscall.Stat(name, &st2); err != nil {
		t.Fatal(err)
	}
	if st2.Ino == st1.Ino {
		t.Errorf("the textfile was written in place (inode %d), not replaced", st1.Ino)
	}
	b, _ = os.ReadFile(name)
	fams = parseTextfile(t, b)
	if got, _ := categoryValue(fams, "cpu"); got != float64(s2.category("cpu"))/1e9 {
		t.Errorf("second run: cpu %v, JSON %v", got, float64(s2.category("cpu"))/1e9)
	}
	if !bytes.Contains(b, []byte(`rank="1"`)) {
		t.Errorf("second run's file lacks rank=\"1\":\n%s", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("textfile directory holds %v, want only the .prom file", names)
	}
}

// An unreachable Pushgateway is a warning: the run keeps its exit code
// and its other outputs are written.
func TestUnreachablePushgatewayWarns(t *testing.T) {
	requireTracing(t)
	dead := "http://" + freeLoopbackAddr(t)
	dir := t.TempDir()
	js, rec := filepath.Join(dir, "s.json"), filepath.Join(dir, "r.json")
	code, _, stderr := coldtrace(t, nil, "-q", "--json", js, "-o", rec, "--push", dead,
		"--label", "host=node1", "--", "sh", "-c", "exit 3")
	if code != 3 {
		t.Errorf("exit %d, want the command's 3: %s", code, stderr)
	}
	if !strings.Contains(stderr, "coldtrace: warning: push metrics to "+dead) {
		t.Errorf("no warning about the push: %q", stderr)
	}
	s := readSummary(t, js)
	if s.ExitCode != 3 {
		t.Errorf("summary exit %d", s.ExitCode)
	}
	r := readRecord(t, rec)
	if r.Labels["host"] != "node1" {
		t.Errorf("record labels %v", r.Labels)
	}
	b, _ := os.ReadFile(js)
	if !bytes.Contains(b, []byte(`"labels"`)) {
		t.Errorf("JSON summary has no labels")
	}
}

// A bad label is refused before anything runs.
func TestInvalidLabelRefusedBeforeRun(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	for _, l := range []string{"1rank=3", "host-name=a", "__x=1", "category=x", "host"} {
		code, _, stderr := coldtrace(t, nil, "-q", "--label", l, "--", "touch", marker)
		if code != exitUsage || !strings.Contains(stderr, "--label") {
			t.Errorf("--label %s: exit %d, %q", l, code, stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("--label %s: the command ran", l)
		}
	}
	code, _, stderr := coldtrace(t, nil, "-q", "--push", "pushgateway:9091", "--", "touch", marker)
	if code != exitUsage {
		t.Errorf("--push without scheme: exit %d, %q", code, stderr)
	}
}

// Under sudo the textfile is written with the invoking user's rights: a
// directory they may not write is refused before the run, and in their
// own directory the file is theirs.
func TestPromTextfileAsSudoUser(t *testing.T) {
	requireTracing(t)
	sudo := []string{"SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody"}
	mkdir := func(uid int) string {
		d, err := os.MkdirTemp("", "coldtrace-prom-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
		return d
	}
	rootDir, userDir := mkdir(0), mkdir(65534)
	code, stdout, stderr := coldtrace(t, sudo, "-q", "--prom-textfile", rootDir, "--", "echo", "ran")
	if code != exitUsage || strings.Contains(stdout, "ran") || !strings.Contains(stderr, "--prom-textfile") {
		t.Errorf("root's directory: exit %d, stdout %q, stderr %q; want refused before the run", code, stdout, stderr)
	}
	code, _, stderr = coldtrace(t, sudo, "-q", "--prom-textfile", userDir, "--label", "host=n1", "--", "true")
	if code != 0 {
		t.Fatalf("user's directory: exit %d: %s", code, stderr)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(userDir, "coldtrace_coldtrace_n1.prom"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 65534 {
		t.Errorf("textfile owned by uid %d, want the sudo user's 65534", st.Uid)
	}
}
