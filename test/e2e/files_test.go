package e2e

// Files, records and status documents the residency tests of the binary
// (status, evict, prefetch, run --cold) share.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/coldtrace/coldtrace/internal/schematest"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/status"
)

const mib = 1 << 20

// writeModel writes size bytes (whole MiB) of a repeated pattern to path.
func writeModel(t *testing.T, path string, size int) {
	t.Helper()
	chunk := bytes.Repeat([]byte("coldtrace"), mib/9+1)[:mib]
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < size; n += mib {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// statusJSON is the part of status --json the tests read.
type statusJSON struct {
	Schema string `json:"schema"`
	Files  []struct {
		Path        string `json:"path"`
		Known       bool   `json:"known"`
		Unknown     string `json:"unknown"`
		Pages       uint64 `json:"pages"`
		Cached      uint64 `json:"cached_pages"`
		CachedBytes int64  `json:"cached_bytes"`
	} `json:"files"`
	Caches []struct {
		Name    string `json:"name"`
		Root    string `json:"root"`
		Exists  bool   `json:"exists"`
		Entries int64  `json:"entries"`
		FS      *struct {
			FS       string `json:"fs"`
			Survival string `json:"survival"`
		} `json:"fs"`
	} `json:"caches"`
	Prediction *struct {
		State        string `json:"state"`
		MissingBytes int64  `json:"missing_bytes"`
		ETANS        int64  `json:"eta_ns"`
		Sentence     string `json:"sentence"`
	} `json:"prediction"`
	Problems []string `json:"problems"`
}

// runStatusJSON runs status --json on args and decodes what it prints.
func runStatusJSON(t *testing.T, args ...string) statusJSON {
	t.Helper()
	code, stdout, stderr := coldtrace(t, nil, append([]string{"status", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("status %v: exit %d: %s", args, code, stderr)
	}
	var doc statusJSON
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || doc.Schema != status.Schema {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	schematest.Validate(t, docStatus.Name, []byte(stdout))
	return doc
}

// writeRecord writes a record of a run that read model from disk in 2 s
// of I/O wait and used a Triton cache at triton.
func writeRecord(t *testing.T, dir, model, triton, host string) string {
	t.Helper()
	const size = 128 * mib
	rec := &record.Record{Schema: record.Schema, Command: []string{"python", "load.py"}, WallNS: 3e9, IntervalNS: 1e8,
		Host:      record.Host{Hostname: host, PageSize: os.Getpagesize()},
		Files:     []record.File{{ID: 0, Path: model, SizeBytes: size, PagesAccessed: size / 4096, PagesMissed: size / 4096, BytesFromDisk: size, IOWaitNS: 2e9}},
		Threads:   []record.Thread{{TID: 10, PID: 10, Comm: "python", IOWaitNS: 2e9, CPUNS: 1e9}},
		Processes: []record.Process{{PID: 10, Comm: "python", Threads: 1, IOWaitNS: 2e9, CPUNS: 1e9, Exited: true, EndNS: 3e9}},
		JIT:       &record.JIT{Caches: []record.Cache{{Name: "triton", Framework: "Triton", Root: triton}}},
	}
	for i := int64(1); i <= 30; i++ {
		s := record.Sample{EndNS: i * 1e8}
		if i <= 20 {
			s.Threads = []record.ThreadDelta{{TID: 10, PID: 10, IOWaitNS: 1e8}}
			s.Files = []record.FileDelta{{File: 0, PagesAccessed: size / 4096 / 20, PagesMissed: size / 4096 / 20, IOWaitNS: 1e8}}
		} else {
			s.Threads = []record.ThreadDelta{{TID: 10, PID: 10, CPUNS: 1e8}}
		}
		rec.Samples = append(rec.Samples, s)
	}
	path := filepath.Join(dir, "run.ctrace")
	if err := record.WriteFile(path, rec); err != nil {
		t.Fatal(err)
	}
	return path
}
