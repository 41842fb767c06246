package record

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func sample() *Record {
	return &Record{Schema: Schema, Command: []string{"cat", "f"}, WallNS: 42, ExitCode: 3,
		Start: time.Unix(1700000000, 0).UTC(),
		Files: []File{{ID: 0, Dev: 254 << 20, Ino: 7, Path: "/f", PagesMissed: 10, PagesAccessed: 12}},
		Samples: []Sample{{EndNS: 42, Threads: []ThreadDelta{{TID: 1, PID: 1, CPUNS: 40, MissCPUNS: 30}},
			Files: []FileDelta{{File: 0, PagesMissed: 10}}}}}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.ctrace")
	if err := WriteFile(path, sample()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.WallNS != 42 || got.ExitCode != 3 || got.Files[0].Path != "/f" || got.Samples[0].Threads[0].MissCPUNS != 30 {
		t.Errorf("round trip changed the record: %+v", got)
	}
	raw, _ := os.ReadFile(path)
	if !bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		t.Errorf("record is not gzip-compressed")
	}
}

func TestPlainJSONAccepted(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(zr)
	if err != nil || r.WallNS != 42 {
		t.Fatalf("decode of plain JSON: %v", err)
	}
}

func TestCorruptAndForeign(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	truncated := buf.Bytes()[:buf.Len()/2]
	if _, err := Decode(bytes.NewReader(truncated)); err == nil {
		t.Errorf("truncated record decoded without error")
	}
	for _, doc := range []string{`{"schema": "coldtrace.record/v3"}`, `{"schema": "something"}`, `{}`} {
		_, err := Decode(strings.NewReader(doc))
		if !errors.Is(err, ErrSchema) {
			t.Errorf("%s: error %v, want ErrSchema", doc, err)
		}
	}
}

func TestLostTotal(t *testing.T) {
	if n := (Lost{RingBuffer: 1, FileTable: 2, ThreadTable: 3, Tracked: 4, Paths: 5}).Total(); n != 15 {
		t.Errorf("total %d", n)
	}
}

func TestTrailingDataRefused(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	gz := buf.Bytes()
	plain, err := io.ReadAll(mustGunzip(t, gz))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"gzip + garbage":       append(slices.Clone(gz), "garbage"...),
		"gzip + second record": append(slices.Clone(gz), gz...),
		"plain + second doc":   append(slices.Clone(plain), plain...),
		"plain + text":         append(slices.Clone(plain), "x"...),
	} {
		if _, err := Decode(bytes.NewReader(data)); err == nil || !strings.Contains(err.Error(), "trailing data") {
			t.Errorf("%s: error %v, want trailing data", name, err)
		}
	}
	// White space after a record is fine (Encode ends with a newline).
	if _, err := Decode(bytes.NewReader(append(slices.Clone(plain), " \n\t\r\n"...))); err != nil {
		t.Errorf("trailing white space: %v", err)
	}
	// A corrupted checksum is found although the JSON ended before it.
	bad := slices.Clone(gz)
	bad[len(bad)-6] ^= 0xff
	if _, err := Decode(bytes.NewReader(bad)); err == nil {
		t.Error("a record with a bad gzip checksum decoded")
	}
}

func mustGunzip(t *testing.T, data []byte) io.Reader {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return zr
}

// TestDecodedSizeBounded: a small compressed file that expands past the
// bound is refused with ErrTooLarge, having read just past the bound.
func TestDecodedSizeBounded(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(`{"schema":"coldtrace.record/v1","command":["`))
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for range 64 {
		zw.Write(chunk)
	}
	zw.Write([]byte(`"]}`))
	zw.Close()
	if buf.Len() > 1<<20 {
		t.Fatalf("bomb is %d bytes compressed", buf.Len())
	}
	_, err := DecodeLimit(bytes.NewReader(buf.Bytes()), 16<<20)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "above 16 MiB decompressed") {
		t.Errorf("64 MiB string under a 16 MiB bound: %v", err)
	}
	if _, err := DecodeLimit(bytes.NewReader(buf.Bytes()), 128<<20); err != nil {
		t.Errorf("64 MiB string under a 128 MiB bound: %v", err)
	}
	// A record of exactly the bound is read; one byte more is not.
	var plain bytes.Buffer
	if err := json.NewEncoder(&plain).Encode(sample()); err != nil {
		t.Fatal(err)
	}
	n := int64(plain.Len())
	if _, err := DecodeLimit(bytes.NewReader(plain.Bytes()), n); err != nil {
		t.Errorf("record of exactly the bound: %v", err)
	}
	if _, err := DecodeLimit(bytes.NewReader(plain.Bytes()), n-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("record one byte above the bound: %v", err)
	}
	if MaxDecodedBytes != 512<<20 {
		t.Errorf("MaxDecodedBytes = %d: README says 512 MiB", MaxDecodedBytes)
	}
}
