package metrics

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels([]string{"host=node1", "rank=3", "model=qwen=fp8"})
	if err != nil {
		t.Fatal(err)
	}
	if got["host"] != "node1" || got["rank"] != "3" || got["model"] != "qwen=fp8" || len(got) != 3 {
		t.Fatalf("labels %v", got)
	}
	for _, bad := range [][]string{
		{"host"}, {"1host=a"}, {"ho-st=a"}, {"__name__=x"}, {"category=x"}, {"file=x"},
		{"host="}, {"host=a", "host=b"}, {"=a"}, {"rank=\xff"},
	} {
		if _, err := ParseLabels(bad); err == nil {
			t.Errorf("ParseLabels(%q) accepted", bad)
		}
	}
}

func TestGroup(t *testing.T) {
	r := fixtures.Record(t, "cat-cold")
	r.Host.Hostname = "box"
	for _, c := range []struct {
		labels        map[string]string
		job, instance string
	}{
		{nil, DefaultJob, "box"},
		{map[string]string{"host": "node1"}, DefaultJob, "node1"},
		{map[string]string{"host": "node1", "rank": "3", "job": "train"}, "train", "node1:rank3"},
		{map[string]string{"instance": "i", "rank": "3"}, DefaultJob, "i"},
	} {
		r.Labels = c.labels
		if job, inst := Group(r); job != c.job || inst != c.instance {
			t.Errorf("Group(%v) = %q, %q; want %q, %q", c.labels, job, inst, c.job, c.instance)
		}
	}
	r.Labels = map[string]string{"host": "a/b c", "rank": "3", "job": "x"}
	if got := TextfileName(r); got != "coldtrace_x_a_b_c_rank3.prom" {
		t.Errorf("TextfileName = %q", got)
	}
}

// parse reads the text exposition back with Prometheus's own parser.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("text does not parse: %v\n%s", err, text)
	}
	return fams
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		}
	}
	t.Fatalf("no %s sample with labels %v", name, want)
	return 0
}

func TestRegistryMatchesAttribution(t *testing.T) {
	for name, r := range fixtures.All(t) {
		t.Run(name, func(t *testing.T) {
			r.Labels = map[string]string{"host": "node1", "rank": "0", "job": "train"}
			res := attribution.Analyze(r)
			reg, err := Registry(r, res)
			if err != nil {
				t.Fatal(err)
			}
			problems, err := testutil.GatherAndLint(reg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
			var buf bytes.Buffer
			if err := WriteText(&buf, reg); err != nil {
				t.Fatal(err)
			}
			fams := parse(t, buf.Bytes())
			run := map[string]string{"host": "node1", "rank": "0", "job": "train"}
			if got := value(t, fams, Prefix+"wall_seconds", run); got != float64(res.WallNS)/1e9 {
				t.Errorf("wall %v, want %v", got, float64(res.WallNS)/1e9)
			}
			var sum float64
			for _, row := range res.Breakdown {
				got := value(t, fams, Prefix+"category_seconds", map[string]string{"category": string(row.Category), "host": "node1"})
				if got != float64(row.NS)/1e9 {
					t.Errorf("%s: %v, want %v", row.Category, got, float64(row.NS)/1e9)
				}
				sum += got
			}
			if d := sum - float64(res.WallNS)/1e9; d > 1e-6 || d < -1e-6 {
				t.Errorf("categories sum to %v, wall %v", sum, float64(res.WallNS)/1e9)
			}
			var bytes uint64
			for _, f := range r.Files {
				bytes += f.BytesFromDisk
			}
			if got := value(t, fams, Prefix+"disk_read_bytes_total", run); got != float64(bytes) {
				t.Errorf("disk bytes %v, want %d", got, bytes)
			}
			if got := value(t, fams, Prefix+"cold", run); (got == 1) != res.Cold {
				t.Errorf("cold %v, result %v", got, res.Cold)
			}
			if got := value(t, fams, Prefix+"downloads_total", run); got != float64(len(r.Downloads)) {
				t.Errorf("downloads %v, want %d", got, len(r.Downloads))
			}
			if row := res.Row(attribution.GPUCompute); row != nil {
				for _, g := range row.GPUs {
					if got := value(t, fams, Prefix+"gpu_busy_seconds", map[string]string{"gpu": strconv.Itoa(g.Index)}); got != float64(g.BusyNS)/1e9 {
						t.Errorf("GPU %d busy %v, want %v", g.Index, got, float64(g.BusyNS)/1e9)
					}
				}
			}
			if r.JIT != nil {
				for _, c := range r.JIT.Caches {
					if got := value(t, fams, Prefix+"cache_misses_total", map[string]string{"cache": c.Name}); got != float64(c.Misses) {
						t.Errorf("cache %s misses %v, want %d", c.Name, got, c.Misses)
					}
				}
			}
		})
	}
}

// A push is a PUT to /metrics/job/JOB/instance/INSTANCE (replacing the
// group), without job and instance among the metrics' own labels.
func TestPushReplacesItsGroup(t *testing.T) {
	var method, path string
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		method, path = req.Method, req.URL.Path
		body, _ = io.ReadAll(req.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	r := fixtures.Record(t, "truth-cold")
	r.Labels = map[string]string{"host": "node1", "rank": "2", "job": "train"}
	if err := Push(context.Background(), srv.URL, r, nil); err != nil {
		t.Fatal(err)
	}
	if method != http.MethodPut || path != "/metrics/job/train/instance/node1:rank2" {
		t.Fatalf("%s %s, want PUT /metrics/job/train/instance/node1:rank2", method, path)
	}
	if len(body) == 0 {
		t.Fatal("empty push")
	}
	if bytes.Contains(body, []byte("\x03job")) || strings.Contains(string(body), "instance") {
		t.Errorf("pushed metrics carry job or instance labels themselves")
	}
}

func TestPushUnreachableIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	r := fixtures.Record(t, "truth-cold")
	if err := Push(context.Background(), url, r, nil); err == nil {
		t.Fatal("push to a closed port succeeded")
	}
}
