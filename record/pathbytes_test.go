package record

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestNamesRoundTripByteExact: every byte a Linux name may hold survives
// Encode and Decode, and a name that is not UTF-8 is carried in path_b64
// beside a readable path.
func TestNamesRoundTripByteExact(t *testing.T) {
	names := []string{
		"/plain/" + strings.Repeat("a", 64),
		"/latin1/caf\xe9",
		"/bad/\xff\xfe\x80tail",
		"/new\nline/x",
		"/quote\"back\\slash/<tag>&",
		"/valid/\u00e9\u4e2d\U0001F600",
		"/" + strings.Repeat("\x01\x1f\x7f\xc3", 60),
	}
	r := sample()
	r.Files = nil
	for i, n := range names {
		r.Files = append(r.Files, File{ID: i, Path: n, HostPath: n + "\xff", NameCut: i == 2})
	}
	var buf bytes.Buffer
	if err := Encode(&buf, r); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Files) != len(names) {
		t.Fatalf("%d files back, want %d", len(got.Files), len(names))
	}
	for i, n := range names {
		f := got.Files[i]
		if f.Path != n || f.HostPath != n+"\xff" || f.NameCut != (i == 2) {
			t.Errorf("file %d: path %q host %q cut %v, want %q, %q, %v", i, f.Path, f.HostPath, f.NameCut, n, n+"\xff", i == 2)
		}
	}
}

// TestNameJSONFields: a UTF-8 name is "path" alone; any other has a
// UTF-8 "path" for reading and its bytes in "path_b64".
func TestNameJSONFields(t *testing.T) {
	b, err := json.Marshal(File{Path: "/ok/\u00e9"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"path":"/ok/é"`)) || bytes.Contains(b, []byte("_b64")) || bytes.Contains(b, []byte("name_cut")) {
		t.Errorf("UTF-8 name: %s", b)
	}
	b, err = json.Marshal(File{Path: "/x/\xff", NameCut: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\"path\":\"/x/\ufffd\"", `"path_b64":"L3gv/w=="`, `"name_cut":true`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("non-UTF-8 name: %s lacks %s", b, want)
		}
	}
	var f File
	if err := json.Unmarshal([]byte(`{"id":3,"path":"x","path_b64":"!!"}`), &f); err == nil {
		t.Errorf("bad base64 decoded: %+v", f)
	}
}

// TestVersion1RecordRead: a record of the previous schema decodes, its
// names as written, and is the current schema in memory.
func TestVersion1RecordRead(t *testing.T) {
	doc := `{"schema":"coldtrace.record/v1","command":["cat"],"wall_ns":7,` +
		`"files":[{"id":0,"dev":1,"ino":2,"path":"/v1/name","host_path":"/h/name","pages_missed":3}]}`
	r, err := Decode(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if r.Schema != Schema || len(r.Files) != 1 || r.Files[0].Path != "/v1/name" || r.Files[0].HostPath != "/h/name" ||
		r.Files[0].PagesMissed != 3 || r.Files[0].NameCut {
		t.Errorf("v1 record read as %+v", r)
	}
}

// TestCacheRootByteExact: a cache root that is not UTF-8 (the export
// lines of report --persist name it) survives Encode and Decode.
func TestCacheRootByteExact(t *testing.T) {
	r := sample()
	roots := []string{"/home/u/.cache/triton", "/home/caf\xe9/.triton/cache", "/a\nb/\xff"}
	r.JIT = &JIT{}
	for _, root := range roots {
		r.JIT.Caches = append(r.JIT.Caches, Cache{Name: "triton", Root: root, Hits: 2})
	}
	var buf bytes.Buffer
	if err := Encode(&buf, r); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.JIT == nil || len(got.JIT.Caches) != len(roots) {
		t.Fatalf("caches back: %+v", got.JIT)
	}
	for i, root := range roots {
		if c := got.JIT.Caches[i]; c.Root != root || c.Hits != 2 || c.Name != "triton" {
			t.Errorf("cache %d: %+v, want root %q", i, c, root)
		}
	}
}

// TestDownloadAndProcessNamesRoundTrip: a download's destination, its
// files' names and a process's executable and argv keep bytes that are
// not UTF-8 through Encode and Decode; all-UTF-8 ones add no _b64 key.
func TestDownloadAndProcessNamesRoundTrip(t *testing.T) {
	bad := "/cache/caf\xe9 \xff\nx"
	r := sample()
	r.Downloads = []Download{{Path: bad, Name: "m\xfe", Peer: "127.0.0.1:1", Files: []DownloadFile{{Path: bad, WrittenPath: bad + ".incomplete"}},
		Candidates: []DownloadFile{{Path: "/ok"}}}}
	r.Processes = []Process{{PID: 7, Exe: "/bin/\xffcc", Args: []string{"cc", "-DX=\"\xff\xfe\"", "ok"}}, {PID: 8, Exe: "/bin/ok", Args: []string{"ok"}}}
	var buf bytes.Buffer
	if err := Encode(&buf, r); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	d := got.Downloads[0]
	if d.Path != bad || d.Name != "m\xfe" || d.Files[0].Path != bad || d.Files[0].WrittenPath != bad+".incomplete" || d.Candidates[0].Path != "/ok" {
		t.Errorf("download %q %q, files %+v, candidates %+v", d.Path, d.Name, d.Files, d.Candidates)
	}
	p := got.Processes[0]
	if p.Exe != "/bin/\xffcc" || len(p.Args) != 3 || p.Args[1] != "-DX=\"\xff\xfe\"" || p.Args[2] != "ok" {
		t.Errorf("process %q %q", p.Exe, p.Args)
	}
	if q := got.Processes[1]; q.Exe != "/bin/ok" || len(q.Args) != 1 {
		t.Errorf("process %q %q", q.Exe, q.Args)
	}
	b, err := json.Marshal(r.Processes[1])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("_b64")) {
		t.Errorf("all-UTF-8 process: %s", b)
	}
}

// TestCommandRoundTripsByteExact: a command line with bytes that are not
// UTF-8 comes back byte for byte; a UTF-8 one is written as text alone.
func TestCommandRoundTripsByteExact(t *testing.T) {
	for _, cmd := range [][]string{
		{"python3", "load.py", "mod\xffel\xfe.bin", "a b\nc"},
		{"python3", "plain.py"},
	} {
		r := &Record{Schema: Schema, Command: cmd}
		var buf bytes.Buffer
		if err := Encode(&buf, r); err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		b64 := strings.Contains(string(doc), `"command_b64"`)
		if want := !utf8.ValidString(strings.Join(cmd, "")); b64 != want {
			t.Errorf("command %q: command_b64 written %v, want %v", cmd, b64, want)
		}
		got, err := Decode(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Command, cmd) || got.CommandB64 != nil {
			t.Errorf("command %q came back as %q (b64 %q)", cmd, got.Command, got.CommandB64)
		}
	}
}

// TestJITNamesRoundTripByteExact: a cache's entry keys, its failures'
// paths, its other roots and a probed library's path keep bytes that are
// not UTF-8, and 255-byte names, through Encode and Decode; a cache whose
// names are all UTF-8 adds no _b64 key.
func TestJITNamesRoundTripByteExact(t *testing.T) {
	long := strings.Repeat("k", 250) + "\xff.pyc"
	bad := "src\xfe/mod.cpython-311.pyc"
	r := sample()
	r.JIT = &JIT{
		Caches: []Cache{{Name: "python", Root: "/c/py\xff", MissedKeys: []string{bad, "ok.pyc", long}, WrittenKeys: []string{long},
			StaleKeys: []string{"a\xc3"}, HitKeys: []string{"plain", "\x80"},
			Failures:   []CacheFailure{{Op: "rename", Errno: "EISDIR", Count: 1, Path: "/c/py\xff/" + long, PIDs: []int32{4}}},
			OtherRoots: []OtherRoot{{Path: "/home/\xe9/.cache/python", Files: 1}}},
			{Name: "triton", Root: "/c/t", MissedKeys: []string{"k1"}, HitKeys: []string{"k2"}}},
		Uprobes: []JITUprobe{{Name: "libx.so:f", Path: "/lib/\xffx.so"}},
	}
	var buf bytes.Buffer
	if err := Encode(&buf, r); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got.JIT == nil || len(got.JIT.Caches) != 2 || len(got.JIT.Uprobes) != 1 {
		t.Fatalf("JIT back: %+v", got.JIT)
	}
	c, want := got.JIT.Caches[0], r.JIT.Caches[0]
	for _, k := range []struct {
		name      string
		got, want []string
	}{
		{"missed", c.MissedKeys, want.MissedKeys}, {"written", c.WrittenKeys, want.WrittenKeys},
		{"stale", c.StaleKeys, want.StaleKeys}, {"hit", c.HitKeys, want.HitKeys},
	} {
		if !slices.Equal(k.got, k.want) {
			t.Errorf("%s keys %q, want %q", k.name, k.got, k.want)
		}
	}
	if len(c.Failures) != 1 || c.Failures[0].Path != want.Failures[0].Path || c.Failures[0].Errno != "EISDIR" {
		t.Errorf("failures %+v", c.Failures)
	}
	if len(c.OtherRoots) != 1 || c.OtherRoots[0].Path != want.OtherRoots[0].Path || c.OtherRoots[0].Files != 1 {
		t.Errorf("other roots %+v", c.OtherRoots)
	}
	if u := got.JIT.Uprobes[0]; u.Path != "/lib/\xffx.so" || u.Name != "libx.so:f" {
		t.Errorf("uprobe %+v", u)
	}
	if k := got.JIT.Caches[1]; !slices.Equal(k.MissedKeys, []string{"k1"}) || !slices.Equal(k.HitKeys, []string{"k2"}) {
		t.Errorf("UTF-8 cache back: %+v", k)
	}
	b, err := json.Marshal(r.JIT.Caches[1])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("_b64")) {
		t.Errorf("all-UTF-8 cache: %s", b)
	}
	b, err = json.Marshal(r.JIT.Caches[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"missed_keys_b64":[`, `"written_keys_b64":[`, `"stale_keys_b64":[`, `"hit_keys_b64":[`, `"path_b64":`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("cache with names not UTF-8 lacks %s: %s", key, b)
		}
	}
	if !utf8.Valid(b) {
		t.Errorf("cache JSON is not UTF-8: %q", b)
	}
}
