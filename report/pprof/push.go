package pprof

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// PushTimeout bounds one profile push: a profiling server that does not
// answer must not hold the run's other outputs for long.
const PushTimeout = 10 * time.Second

// ServiceLabel is the run label (--label service=NAME) that names the
// service a pushed profile is filed under; without it, the command's
// name.
const ServiceLabel = "service"

// ProfileName is the Parca profile name (its __name__ label): Parca files
// each sample type of it as NAME:TYPE:UNIT.
const ProfileName = "coldtrace"

// maxResponse bounds the part of an error answer quoted in the warning.
const maxResponse = 512

// Server is the kind of profiling server a push goes to.
type Server string

// The servers a profile can be pushed to.
const (
	Pyroscope Server = "pyroscope"
	Parca     Server = "parca"
)

// parcaPath is the HTTP path of Parca's WriteRaw (its gRPC gateway).
const parcaPath = "/profiles/writeraw"

// pyroscopePath is the HTTP path of Pyroscope's ingest API.
const pyroscopePath = "/ingest"

// Target resolves a --push-profile URL: one whose path ends in
// /profiles/writeraw is Parca's WriteRaw, used as given; any other is a
// Pyroscope server, whose /ingest is appended to the path unless the path
// already ends in it (so both the server's base URL and its ingest URL
// work). The URL must be http or https with a host, without user
// information (credentials go in the header file, never on a command
// line that the record keeps).
func Target(raw string) (Server, *url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", nil, fmt.Errorf("want an http:// or https:// URL of a Pyroscope or Parca server")
	}
	if u.User != nil {
		return "", nil, fmt.Errorf("the URL holds user information; put credentials in a header file (--push-profile-header-file)")
	}
	p := strings.TrimSuffix(u.Path, "/")
	switch {
	case strings.HasSuffix(p, parcaPath):
		u.Path = p
		return Parca, u, nil
	case strings.HasSuffix(p, pyroscopePath):
		u.Path = p
	default:
		u.Path = path.Join("/", p, pyroscopePath)
	}
	u.RawPath = ""
	return Pyroscope, u, nil
}

// ParseHeaders reads a header file: one "Name: value" a line, as curl's
// -H @FILE takes them (X-Scope-OrgID: tenant, Authorization: Bearer …).
// Blank lines and lines starting with '#' are skipped. A line without a
// colon, an invalid name or value is an error naming its line number, not
// its text: the file holds secrets.
func ParseHeaders(r io.Reader) (http.Header, error) {
	h := http.Header{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d: want NAME: VALUE", n)
		case !validHeaderName(name):
			return nil, fmt.Errorf("line %d: not a valid header name", n)
		case !validHeaderValue(value):
			return nil, fmt.Errorf("line %d: the value holds characters a header may not", n)
		}
		switch textproto.CanonicalMIMEHeaderKey(name) {
		case "Content-Type", "Content-Length", "Host", "Transfer-Encoding":
			return nil, fmt.Errorf("line %d: %s is set by the push itself", n, textproto.CanonicalMIMEHeaderKey(name))
		}
		h.Add(name, value)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return h, nil
}

// validHeaderName says whether name is an HTTP token (RFC 9110 5.1).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue refuses control characters but tab (RFC 9110 5.5):
// a CR or LF would start another header.
func validHeaderValue(v string) bool {
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// ServiceName is the name a pushed profile is filed under: the run label
// service, else the base name of the command's first word, else
// "coldtrace".
func ServiceName(r *record.Record) string {
	if s := r.Labels[ServiceLabel]; s != "" {
		return s
	}
	if len(r.Command) > 0 && r.Command[0] != "" {
		return filepath.Base(r.Command[0])
	}
	return ProfileName
}

// Push sends the run's pprof profile (Build) to the server of rawURL
// (Target) with the extra headers, within PushTimeout. It follows no
// redirect: a server must not send coldtrace (root, under sudo) to a URL
// that /etc/coldtrace/config does not allow.
func Push(ctx context.Context, rawURL string, header http.Header, r *record.Record, res *attribution.Result) error {
	server, u, err := Target(rawURL)
	if err != nil {
		return fmt.Errorf("push profile: %w", err)
	}
	p, err := Build(r, res)
	if err != nil {
		return fmt.Errorf("push profile: %w", err)
	}
	var raw bytes.Buffer
	if err := p.Write(&raw); err != nil {
		return fmt.Errorf("push profile: encode: %w", err)
	}
	var req *http.Request
	if server == Parca {
		req, err = parcaRequest(ctx, u, raw.Bytes(), r)
	} else {
		req, err = pyroscopeRequest(ctx, u, raw.Bytes(), r)
	}
	if err != nil {
		return fmt.Errorf("push profile to %s: %w", u.Redacted(), err)
	}
	for name, values := range header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	if err := send(req); err != nil {
		return fmt.Errorf("push profile to %s %s: %w", server, u.Redacted(), err)
	}
	return nil
}

// send does req with PushTimeout, following no redirect, and turns an
// answer other than 2xx into an error quoting the start of its body.
func send(req *http.Request) error {
	ctx, cancel := context.WithTimeout(req.Context(), PushTimeout)
	defer cancel()
	client := &http.Client{Timeout: PushTimeout, CheckRedirect: func(next *http.Request, _ []*http.Request) error {
		return fmt.Errorf("the server redirected the push to %s; not followed", next.URL.Redacted())
	}}
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("server answered %s: %q", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// pyroscopeRequest is Pyroscope's ingest as its Go client sends it: the
// gzipped pprof profile as the multipart file "profile"; in the query the
// application name with the run labels as its tags (name=SERVICE{k=v}),
// the run's span in Unix seconds (from, until), format=pprof.
func pyroscopeRequest(ctx context.Context, u *url.URL, raw []byte, r *record.Record) (*http.Request, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("profile", "profile.pprof")
	if err != nil {
		return nil, err
	}
	if _, err := fw.Write(raw); err != nil {
		return nil, err
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	from, until := span(r)
	q := u.Query()
	q.Set("name", pyroscopeName(r))
	q.Set("from", strconv.FormatInt(from.Unix(), 10))
	q.Set("until", strconv.FormatInt(until.Unix(), 10))
	q.Set("format", "pprof")
	q.Set("spyName", ProfileName)
	target := *u
	target.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return req, nil
}

// pyroscopeName is the application name with its tags: SERVICE{k=v,…},
// the run labels but service itself, sorted. Pyroscope files the name as
// service_name and the tags as labels.
func pyroscopeName(r *record.Record) string {
	var tags []string
	for k, v := range r.Labels {
		if k != ServiceLabel {
			tags = append(tags, k+"="+v)
		}
	}
	sort.Strings(tags)
	return ServiceName(r) + "{" + strings.Join(tags, ",") + "}"
}

// span is the run's wall-clock extent, at least one second long (a
// Pyroscope server drops a profile whose until is not after from).
func span(r *record.Record) (from, until time.Time) {
	from = r.Start
	if from.IsZero() {
		from = time.Now()
	}
	until = from.Add(time.Duration(r.WallNS))
	if until.Unix() <= from.Unix() {
		until = from.Add(time.Second)
	}
	return from, until
}

// parcaWriteRaw is Parca's WriteRawRequest in the JSON its HTTP gateway
// accepts (protobuf JSON: lowerCamelCase names, bytes in base64).
type parcaWriteRaw struct {
	Series     []parcaSeries `json:"series"`
	Normalized bool          `json:"normalized"`
}

type parcaSeries struct {
	Labels  parcaLabelSet `json:"labels"`
	Samples []parcaSample `json:"samples"`
}

type parcaLabelSet struct {
	Labels []parcaLabel `json:"labels"`
}

type parcaLabel struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type parcaSample struct {
	RawProfile []byte `json:"rawProfile"` // encoding/json writes []byte in base64
}

// parcaRequest is Parca's WriteRaw: one series labelled __name__
// coldtrace, service_name and the run labels, holding the gzipped pprof
// profile. Normalized is set: the profile has no addresses to relocate.
func parcaRequest(ctx context.Context, u *url.URL, raw []byte, r *record.Record) (*http.Request, error) {
	labels := []parcaLabel{{"__name__", ProfileName}, {"service_name", ServiceName(r)}}
	for k, v := range r.Labels {
		if k != ServiceLabel {
			labels = append(labels, parcaLabel{k, v})
		}
	}
	sort.Slice(labels, func(i, j int) bool { return labels[i].Name < labels[j].Name })
	body, err := json.Marshal(parcaWriteRaw{
		Series:     []parcaSeries{{Labels: parcaLabelSet{labels}, Samples: []parcaSample{{raw}}}},
		Normalized: true,
	})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}
