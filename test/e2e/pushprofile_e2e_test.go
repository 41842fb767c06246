package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/coldtrace/coldtrace/internal/config"
	"github.com/coldtrace/coldtrace/internal/testuser"
)

// profileSink is a profiling server stand-in: it decodes what arrives,
// as Pyroscope (/…/ingest, multipart "profile") or Parca
// (/profiles/writeraw, JSON rawProfile) would, and keeps each push.
type profileSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	pushes []sinkPush
}

type sinkPush struct {
	path    string
	name    string // Pyroscope's name query parameter
	header  http.Header
	profile *profile.Profile
	err     error
}

func newProfileSink(t *testing.T, status int) *profileSink {
	s := &profileSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := sinkPush{path: r.URL.Path, name: r.URL.Query().Get("name"), header: r.Header.Clone()}
		if strings.HasSuffix(r.URL.Path, "/profiles/writeraw") {
			var req struct {
				Series []struct {
					Samples []struct {
						RawProfile []byte `json:"rawProfile"`
					} `json:"samples"`
				} `json:"series"`
			}
			p.err = json.NewDecoder(r.Body).Decode(&req)
			if p.err == nil && len(req.Series) == 1 && len(req.Series[0].Samples) == 1 {
				p.profile, p.err = profile.ParseData(req.Series[0].Samples[0].RawProfile)
			}
		} else if f, _, err := r.FormFile("profile"); err != nil {
			p.err = err
		} else {
			p.profile, p.err = profile.Parse(f)
		}
		s.mu.Lock()
		s.pushes = append(s.pushes, p)
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *profileSink) taken() []sinkPush {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkPush(nil), s.pushes...)
}

// TestProfilePushReachesPyroscopeAndParca: a run's profile arrives whole
// at a Pyroscope and at a Parca stand-in, with the header file's headers,
// filed under --label service; the headers' secret is in no output.
func TestProfilePushReachesPyroscopeAndParca(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	hdr := filepath.Join(dir, "headers")
	if err := os.WriteFile(hdr, []byte("X-Scope-OrgID: team-a\nAuthorization: Bearer tok-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sink := newProfileSink(t, http.StatusOK)
	for _, target := range []string{sink.srv.URL, sink.srv.URL + "/profiles/writeraw"} {
		pp, rec, js := filepath.Join(dir, "p.pb.gz"), filepath.Join(dir, "r.rec"), filepath.Join(dir, "s.json")
		code, _, stderr := coldtrace(t, nil, "--pprof", pp, "-o", rec, "--json", js, "--label", "service=trainer",
			"--push-profile", target, "--push-profile-header-file", hdr, "--", "sh", "-c", "cat /etc/hostname >/dev/null")
		if code != 0 || strings.Contains(stderr, "warning: push profile") {
			t.Fatalf("push to %s: exit %d: %s", target, code, stderr)
		}
		for _, out := range []string{pp, rec, js} {
			if b, _ := os.ReadFile(out); bytes.Contains(b, []byte("tok-s3cret")) {
				t.Errorf("%s holds the header file's token", out)
			}
		}
		if strings.Contains(stderr, "tok-s3cret") {
			t.Errorf("stderr holds the token")
		}
		want := readPprof(t, pp)
		pushes := sink.taken()
		got := pushes[len(pushes)-1]
		if got.err != nil || got.profile == nil {
			t.Fatalf("push to %s did not decode: %v", target, got.err)
		}
		if len(got.profile.Sample) != len(want.Sample) || len(got.profile.Sample) == 0 {
			t.Errorf("push to %s: %d samples, --pprof has %d", target, len(got.profile.Sample), len(want.Sample))
		}
		if got.header.Get("X-Scope-OrgID") != "team-a" || got.header.Get("Authorization") != "Bearer tok-s3cret" {
			t.Errorf("push to %s: headers %v", target, got.header)
		}
	}
	pushes := sink.taken()
	if len(pushes) != 2 || pushes[0].path != "/ingest" || !strings.HasPrefix(pushes[0].name, "trainer{") || pushes[1].path != "/profiles/writeraw" {
		t.Errorf("pushes %+v", pushes)
	}
}

func readPprof(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// TestFailedProfilePushWarns: a server that refuses the push costs a
// warning; the command's exit code and the other outputs stay.
func TestFailedProfilePushWarns(t *testing.T) {
	requireTracing(t)
	sink := newProfileSink(t, http.StatusInternalServerError)
	js := filepath.Join(t.TempDir(), "s.json")
	code, _, stderr := coldtrace(t, nil, "-q", "--json", js, "--push-profile", sink.srv.URL, "--", "sh", "-c", "exit 3")
	if code != 3 || !strings.Contains(stderr, "coldtrace: warning: push profile to pyroscope "+sink.srv.URL+"/ingest") ||
		!strings.Contains(stderr, "500") {
		t.Errorf("exit %d (want the command's 3), stderr %q", code, stderr)
	}
	if s := readSummary(t, js); s.ExitCode != 3 {
		t.Errorf("summary exit %d", s.ExitCode)
	}
	if len(sink.taken()) != 1 {
		t.Errorf("%d pushes reached the server, want 1", len(sink.taken()))
	}
}

// TestProfilePushArgumentsCheckedBeforeRun: a bad URL, a header file
// without --push-profile, and a malformed or missing header file are
// usage errors before the command runs.
func TestProfilePushArgumentsCheckedBeforeRun(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("Authorization Bearer s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--push-profile", "pyro:4040"},
		{"--push-profile", "http://u:p@pyro/"},
		{"--push-profile-header-file", bad},
		{"--push-profile", "http://pyro/", "--push-profile-header-file", bad},
		{"--push-profile", "http://pyro/", "--push-profile-header-file", filepath.Join(dir, "missing")},
	} {
		code, _, stderr := coldtrace(t, nil, append(append([]string{"-q"}, args...), "--", "touch", marker)...)
		if code != exitUsage || !strings.Contains(stderr, "--push-profile") || strings.Contains(stderr, "s3cret") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%v: the command ran", args)
		}
	}
}

// TestProfilePushUnderSudoOnlyToAllowedURLs: under sudo --push-profile
// obeys the push-allow lines of /etc/coldtrace/config as --push does,
// and the header file is read with the invoking user's rights.
func TestProfilePushUnderSudoOnlyToAllowedURLs(t *testing.T) {
	requireTracing(t)
	u := testuser.Create(t)
	sink := newProfileSink(t, http.StatusOK)
	dir := userDir(t, u)
	marker := filepath.Join(dir, "ran")
	rootOnly := filepath.Join(t.TempDir(), "root-headers")
	if err := os.WriteFile(rootOnly, []byte("Authorization: Bearer root\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	useConfig(t, fmt.Sprintf("push-allow %s/allowed\n", sink.srv.URL), 0o644)
	push := func(args ...string) ctRun {
		os.Remove(marker)
		return runCT(t, ctOptions{env: sudoEnv(u)}, append(append([]string{"-q"}, args...), "--", "touch", marker)...)
	}
	other := sink.srv.URL + "/other"
	r := push("--push-profile", other)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--push-profile "+other+"/ingest refused under sudo: "+config.Path+" has no push-allow line") {
		t.Errorf("push to %s: exit %d, %q", other, r.code, r.stderr)
	}
	r = push("--push-profile", sink.srv.URL+"/allowed", "--push-profile-header-file", rootOnly)
	if r.code != exitUsage || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("root's header file under sudo: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a refused push let the command run")
	}
	if r := push("--push-profile", sink.srv.URL+"/allowed"); r.code != 0 {
		t.Errorf("allowed push: exit %d, %q", r.code, r.stderr)
	}
	pushes := sink.taken()
	if len(pushes) != 1 || pushes[0].path != "/allowed/ingest" || pushes[0].profile == nil {
		t.Errorf("pushes %+v, want one to /allowed/ingest", pushes)
	}
}
