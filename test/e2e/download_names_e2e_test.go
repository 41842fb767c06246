package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// namesBody is what the name tests' servers send: a download (over
// record.DownloadMinBytes), unpaced.
const namesBody = 8 << 20

func namesHandler() http.Handler {
	body := make([]byte, namesBody)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(namesBody))
		_, _ = w.Write(body)
	})
}

// A download's host is named whoever fetched it and however its address
// was found: a child curl that runs before any probe could reach it, given
// the address with --resolve (no lookup at all), is named by its request's
// Host header over HTTP and by its ClientHello's server name over TLS; a
// Python client that looks the name up keeps the lookup's name. The
// record and the summary say where each name came from.
func TestDownloadNamedByItsFirstBytes(t *testing.T) {
	requireTracing(t)
	curl := "/usr/bin/curl"
	if _, err := os.Stat(curl); err != nil {
		t.Skip("needs /usr/bin/curl")
	}
	plain := httptest.NewServer(namesHandler())
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(namesHandler())
	t.Cleanup(secure.Close)
	port := func(s *httptest.Server) string { return strconv.Itoa(s.Listener.Addr().(*net.TCPAddr).Port) }
	dest := filepath.Join(t.TempDir(), "model.bin")
	// "; true": sh forks curl rather than executing it in its place.
	viaShell := func(name string, s *httptest.Server, scheme string) []string {
		p := port(s)
		return []string{"sh", "-c", fmt.Sprintf(`%s -sk -o %q --resolve %s:%s:127.0.0.1 %s://%s:%s/model; true`, curl, dest, name, p, scheme, name, p)}
	}
	cases := []struct {
		name    string
		command []string
		host    string
		from    string
	}{
		{"curl child over HTTP", viaShell("models.example", plain, "http"), "models.example", record.HostFromHTTP},
		{"curl child over TLS", viaShell("Weights.Example", secure, "https"), "weights.example", record.HostFromTLS},
		{"Python client that looks its host up", []string{"/usr/bin/python3", "-c",
			`import sys, urllib.request; urllib.request.urlopen(sys.argv[1]).read()`,
			"http://localhost:" + port(plain) + "/model"}, "localhost", record.HostFromLookup},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := os.Stat(c.command[0]); c.command[0] != "sh" && err != nil {
				t.Skipf("needs %s", c.command[0])
			}
			out := filepath.Join(t.TempDir(), "run.rec")
			summary := filepath.Join(t.TempDir(), "summary.json")
			code, _, stderr := coldtrace(t, nil, append([]string{"-q", "-o", out, "--json", summary, "--"}, c.command...)...)
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			rec := readRecord(t, out)
			d := onlyDownload(t, rec)
			if d.Host != c.host || d.HostFrom != c.from {
				t.Errorf("download from %s: host %q from %q, want %q from %q", d.Peer, d.Host, d.HostFrom, c.host, c.from)
			}
			for _, dc := range d.Connections {
				if dc.Host != c.host || dc.HostFrom != c.from {
					t.Errorf("connection from pid %d: host %q from %q, want %q from %q", dc.PID, dc.Host, dc.HostFrom, c.host, c.from)
				}
			}
			b, err := os.ReadFile(summary)
			if err != nil {
				t.Fatal(err)
			}
			var sum struct {
				Downloads []struct {
					Host     string `json:"host"`
					HostFrom string `json:"host_from"`
				} `json:"downloads"`
			}
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			if len(sum.Downloads) != 1 || sum.Downloads[0].Host != c.host || sum.Downloads[0].HostFrom != c.from {
				t.Errorf("summary's downloads %+v, want one from %q (%s)", sum.Downloads, c.host, c.from)
			}
		})
	}
}

// Host names are kept whole: a lookup of a name longer than 63 bytes
// (up to DNS's longest) names the download by all of it, where it was
// once cut to 63 bytes, which named another host. The names resolve
// from an /etc/hosts of the client's own mount namespace.
func TestLongHostNamesAreKeptWhole(t *testing.T) {
	requireTracing(t)
	for _, p := range []string{"/usr/bin/unshare", "/usr/bin/python3"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("needs %s", p)
		}
	}
	srv := httptest.NewServer(namesHandler())
	t.Cleanup(srv.Close)
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	label := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	names := []string{
		label('b', 40) + "." + label('c', 25) + ".example",                                          // 74 bytes
		strings.Join([]string{label('d', 61), label('e', 61), label('f', 61), label('g', 61)}, "."), // 247 bytes
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n127.0.0.1 "+strings.Join(names, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Run(strconv.Itoa(len(name)), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run.rec")
			fetch := `import sys, urllib.request; urllib.request.urlopen(sys.argv[1]).read()`
			script := fmt.Sprintf(`mount --bind %q /etc/hosts && exec /usr/bin/python3 -c %q http://%s:%s/model`, hosts, fetch, name, port)
			code, _, stderr := coldtrace(t, nil, "-q", "-o", out, "--", "/usr/bin/unshare", "-m", "sh", "-c", script)
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			rec := readRecord(t, out)
			if len(rec.Downloads) != 1 {
				t.Fatalf("%d downloads, want 1", len(rec.Downloads))
			}
			if d := rec.Downloads[0]; d.Host != name || d.HostFrom != record.HostFromLookup {
				t.Errorf("host %q (%d bytes) from %q, want the %d-byte name from a lookup", d.Host, len(d.Host), d.HostFrom, len(name))
			}
		})
	}
}
