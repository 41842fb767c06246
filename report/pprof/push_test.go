package pprof

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

// received is what a stand-in server saw of one push.
type received struct {
	path, query, contentType string
	header                   http.Header
	profile                  *profile.Profile
	labels                   map[string]string // Parca's series labels
	err                      string            // why the body did not decode
}

// pyroscopeStandIn decodes pushes as Pyroscope's /ingest does: a
// multipart form whose file "profile" is a pprof profile.
func pyroscopeStandIn(t *testing.T, got chan<- received) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := received{path: r.URL.Path, query: r.URL.RawQuery, contentType: r.Header.Get("Content-Type"), header: r.Header.Clone()}
		f, _, err := r.FormFile("profile")
		if err == nil {
			rc.profile, err = profile.Parse(f)
		}
		if err != nil {
			rc.err = err.Error()
		}
		got <- rc
	}))
	t.Cleanup(srv.Close)
	return srv
}

// parcaStandIn decodes pushes as Parca's gateway does: a JSON
// WriteRawRequest whose samples' rawProfile is a base64 pprof profile.
func parcaStandIn(t *testing.T, got chan<- received) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := received{path: r.URL.Path, contentType: r.Header.Get("Content-Type"), header: r.Header.Clone(), labels: map[string]string{}}
		var req struct {
			Series []struct {
				Labels struct {
					Labels []struct{ Name, Value string } `json:"labels"`
				} `json:"labels"`
				Samples []struct {
					RawProfile []byte `json:"rawProfile"`
				} `json:"samples"`
			} `json:"series"`
			Normalized bool `json:"normalized"`
		}
		err := json.NewDecoder(r.Body).Decode(&req)
		if err == nil && (len(req.Series) != 1 || len(req.Series[0].Samples) != 1) {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			for _, l := range req.Series[0].Labels.Labels {
				rc.labels[l.Name] = l.Value
			}
			rc.profile, err = profile.ParseData(req.Series[0].Samples[0].RawProfile)
		}
		if err != nil {
			rc.err = err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
		got <- rc
	}))
	t.Cleanup(srv.Close)
	return srv
}

// checkProfile: the pushed profile is the one --pprof writes.
func checkProfile(t *testing.T, rc received, r *record.Record) {
	t.Helper()
	if rc.err != "" || rc.profile == nil {
		t.Fatalf("the server could not decode the push: %s", rc.err)
	}
	want, err := Build(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.profile.Sample) != len(want.Sample) || len(rc.profile.SampleType) != 2 || rc.profile.SampleType[0].Type != WallType {
		t.Errorf("pushed profile: %d samples of %v, want %d of wall, disk_read", len(rc.profile.Sample), rc.profile.SampleType, len(want.Sample))
	}
}

// A push to a Pyroscope server goes to /ingest as a multipart form with
// the pprof profile, the service name and labels in name, the run's span
// in from/until, and the header file's headers.
func TestPushProfileToPyroscope(t *testing.T) {
	r := fixtures.Record(t, "cat-cold")
	r.Labels = map[string]string{"service": "trainer", "rank": "3"}
	got := make(chan received, 1)
	srv := pyroscopeStandIn(t, got)
	h, err := ParseHeaders(strings.NewReader("# tenant\nX-Scope-OrgID: team-a\n\nAuthorization: Bearer s3cret\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Push(context.Background(), srv.URL+"/base/", h, r, nil); err != nil {
		t.Fatal(err)
	}
	rc := <-got
	checkProfile(t, rc, r)
	if rc.path != "/base/ingest" || !strings.HasPrefix(rc.contentType, "multipart/form-data") {
		t.Errorf("path %s, content type %s", rc.path, rc.contentType)
	}
	if rc.header.Get("X-Scope-OrgID") != "team-a" || rc.header.Get("Authorization") != "Bearer s3cret" {
		t.Errorf("headers %v", rc.header)
	}
	q := parseQuery(t, rc.query)
	from, until := r.Start.Unix(), r.Start.Add(time.Duration(r.WallNS)).Unix()
	if until <= from {
		until = from + 1
	}
	if q["name"] != "trainer{rank=3}" || q["format"] != "pprof" || q["from"] != strconv.FormatInt(from, 10) || q["until"] != strconv.FormatInt(until, 10) {
		t.Errorf("query %v: want name trainer{rank=3}, format pprof, from %d, until %d", q, from, until)
	}
}

// Without --label service the service is the command's name.
func TestPushedServiceIsTheCommandsName(t *testing.T) {
	r := &record.Record{Command: []string{"/usr/bin/python3", "train.py"}}
	if got := ServiceName(r); got != "python3" {
		t.Errorf("service %q, want python3", got)
	}
	r.Labels = map[string]string{"service": "svc"}
	if got := pyroscopeName(r); got != "svc{}" {
		t.Errorf("name %q, want svc{}", got)
	}
}

// A URL ending in /profiles/writeraw is Parca's: one JSON WriteRawRequest
// series labelled __name__, service_name and the run labels.
func TestPushProfileToParca(t *testing.T) {
	r := fixtures.Record(t, "cat-cold")
	r.Labels = map[string]string{"host": "node1"}
	got := make(chan received, 1)
	srv := parcaStandIn(t, got)
	if err := Push(context.Background(), srv.URL+"/profiles/writeraw", http.Header{"X-Tenant": {"t1"}}, r, nil); err != nil {
		t.Fatal(err)
	}
	rc := <-got
	checkProfile(t, rc, r)
	if rc.path != "/profiles/writeraw" || rc.contentType != "application/json" || rc.header.Get("X-Tenant") != "t1" {
		t.Errorf("path %s, content type %s, headers %v", rc.path, rc.contentType, rc.header)
	}
	want := map[string]string{"__name__": ProfileName, "service_name": ServiceName(r), "host": "node1"}
	if len(rc.labels) != len(want) {
		t.Errorf("labels %v, want %v", rc.labels, want)
	}
	for k, v := range want {
		if rc.labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, rc.labels[k], v)
		}
	}
}

// The URL decides the server; credentials in it are refused.
func TestPushProfileTarget(t *testing.T) {
	for _, c := range []struct{ in, server, url string }{
		{"http://pyro:4040", "pyroscope", "http://pyro:4040/ingest"},
		{"http://pyro:4040/ingest", "pyroscope", "http://pyro:4040/ingest"},
		{"https://gw/tenant/", "pyroscope", "https://gw/tenant/ingest"},
		{"http://parca:7070/profiles/writeraw", "parca", "http://parca:7070/profiles/writeraw"},
		{"http://gw/parca/profiles/writeraw/", "parca", "http://gw/parca/profiles/writeraw"},
	} {
		s, u, err := Target(c.in)
		if err != nil || string(s) != c.server || u.String() != c.url {
			t.Errorf("%s: %s %v %v, want %s %s", c.in, s, u, err, c.server, c.url)
		}
	}
	for _, bad := range []string{"pyro:4040", "ftp://x/", "http://u:p@pyro/", "http:///ingest"} {
		if _, _, err := Target(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// A bad header file line is named by number, never quoted (it holds
// secrets); headers the push sets itself are refused.
func TestPushProfileHeaderFileErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Authorization Bearer s3cret\n", "line 1: want NAME: VALUE"},
		{"# c\nBad Name: s3cret\n", "line 2: not a valid header name"},
		{"X-A: s3cret\x01\n", "line 1: the value holds"},
		{"content-type: text/plain\n", "line 1: Content-Type is set by the push itself"},
	} {
		_, err := ParseHeaders(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v, want %q without the secret", c.in, err, c.want)
		}
	}
}

// A server that refuses the push or redirects it is an error quoting its
// answer; a redirect is not followed.
func TestPushProfileFailures(t *testing.T) {
	r := fixtures.Record(t, "cat-cold")
	var followed bytes.Buffer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/refuse/ingest":
			http.Error(w, "tenant unknown", http.StatusUnauthorized)
		case "/redir/ingest":
			http.Redirect(w, req, "/elsewhere/ingest", http.StatusTemporaryRedirect)
		default:
			followed.WriteString(req.URL.Path)
		}
	}))
	defer srv.Close()
	err := Push(context.Background(), srv.URL+"/refuse", nil, r, nil)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "tenant unknown") {
		t.Errorf("refused push: %v", err)
	}
	err = Push(context.Background(), srv.URL+"/redir", nil, r, nil)
	if err == nil || !strings.Contains(err.Error(), "not followed") || followed.Len() != 0 {
		t.Errorf("redirected push: %v; followed to %q", err, followed.String())
	}
}

func parseQuery(t *testing.T, raw string) map[string]string {
	t.Helper()
	v, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatalf("query %q: %v", raw, err)
	}
	out := map[string]string{}
	for k := range v {
		out[k] = v.Get(k)
	}
	return out
}
