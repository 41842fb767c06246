package record

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrSchema is returned for a file that is not a coldtrace record of a
// version this build understands.
var ErrSchema = errors.New("not a coldtrace record this version can read")

// Encode writes r as gzip-compressed JSON.
func Encode(w io.Writer, r *Record) error {
	zw := gzip.NewWriter(w)
	enc := json.NewEncoder(zw)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress record: %w", err)
	}
	return nil
}

// Decode reads a record written by Encode; plain (uncompressed) JSON is
// accepted too, so a record can be edited by hand.
func Decode(rd io.Reader) (*Record, error) {
	br := bufio.NewReader(rd)
	var src io.Reader = br
	if magic, err := br.Peek(2); err == nil && bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("open compressed record: %w", err)
		}
		defer zr.Close()
		src = zr
	}
	var r Record
	dec := json.NewDecoder(src)
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode record (corrupt or truncated?): %w", err)
	}
	if r.Schema != Schema {
		if r.Schema == "" {
			return nil, fmt.Errorf("%w: no schema field", ErrSchema)
		}
		if !strings.HasPrefix(r.Schema, "coldtrace.record/") {
			return nil, fmt.Errorf("%w: schema %q", ErrSchema, r.Schema)
		}
		return nil, fmt.Errorf("%w: schema %q, this build reads %q", ErrSchema, r.Schema, Schema)
	}
	return &r, nil
}

// ReadFile reads a record from path.
func ReadFile(path string) (*Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteFileAtomic writes data produced by write to path through a temporary
// file in the same directory and a rename, so a reader never sees half a
// file and an old file survives a failed write.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CheckWritable fails early, before an hour-long run, when path cannot be
// written: its directory is missing or read-only, or path is a directory.
// It creates and removes a probe file next to path and leaves an existing
// file untouched.
func CheckWritable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("output %s: is a directory", path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("output %s: %s is not a directory", path, dir)
	}
	probe, err := os.CreateTemp(dir, "."+filepath.Base(path)+".probe*")
	if err != nil {
		return fmt.Errorf("output %s: cannot write to %s: %w", path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// WriteFile writes r to path atomically.
func WriteFile(path string, r *Record) error {
	return WriteFileAtomic(path, func(w io.Writer) error { return Encode(w, r) })
}
