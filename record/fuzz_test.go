package record

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fuzzLimit keeps each fuzzed decode small and fast; the bound's own path
// is fuzzed too, since gzip inputs can expand past it.
const fuzzLimit = 4 << 20

// FuzzDecode: no input makes Decode panic or read past its bound, and a
// record it accepts encodes and decodes to the same bytes again. Seeds:
// the recorded runs under testdata/records (plain and gzip) and the
// corpus in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "records", "*.json"))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		r, err := Decode(bytes.NewReader(data))
		if err != nil {
			f.Fatal(err)
		}
		var gz bytes.Buffer
		if err := Encode(&gz, r); err != nil {
			f.Fatal(err)
		}
		f.Add(gz.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeLimit(bytes.NewReader(data), fuzzLimit)
		if err != nil {
			if r != nil {
				t.Fatalf("a record and an error: %v", err)
			}
			return
		}
		var once, twice bytes.Buffer
		if err := Encode(&once, r); err != nil {
			t.Fatalf("encode a decoded record: %v", err)
		}
		r2, err := Decode(bytes.NewReader(once.Bytes()))
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				return
			}
			t.Fatalf("decode an encoded record: %v", err)
		}
		if err := Encode(&twice, r2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once.Bytes(), twice.Bytes()) {
			t.Fatalf("encode → decode → encode changed the record")
		}
	})
}
