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
	"reflect"
	"strings"
)

// ErrSchema is returned for a file that is not a coldtrace record of a
// version this build understands.
var ErrSchema = errors.New("not a coldtrace record this version can read")

// Encode writes r as gzip-compressed JSON.
func Encode(w io.Writer, r *Record) error {
	return EncodeLevel(w, r, gzip.DefaultCompression)
}

// EncodeLevel is Encode at a gzip level of its own: checkpoints, written
// every minute of a long run, take gzip.BestSpeed (a 10-minute run's
// record: 0.40 s instead of 1.02 s with the JSON, 1.55 times the size).
func EncodeLevel(w io.Writer, r *Record, level int) error {
	zw, err := gzip.NewWriterLevel(w, level)
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	bw := bufio.NewWriterSize(zw, 64<<10)
	if err := encodeRecord(bw, r); err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress record: %w", err)
	}
	return nil
}

// MaxDecodedBytes bounds a record's size once decompressed: 512 MiB, some
// five times an hour's record of a busy 40-thread program at the default
// 100 ms interval. A larger one is refused before it is held in memory, so
// a small compressed file cannot make report or diff use gigabytes (a
// 1 MB gzip of a 1 GiB string once took 6.7 GB for 37 s).
const MaxDecodedBytes = 512 << 20

// ErrTooLarge is returned for a record above the decoding bound.
var ErrTooLarge = errors.New("record too large")

// Decode reads a record written by Encode; plain (uncompressed) JSON is
// accepted too, so a record can be edited by hand. The record must be the
// whole input: anything but white space after it is an error, and so is
// a record above MaxDecodedBytes once decompressed, one with more entries
// in an array than its bound (MaxFiles, MaxProcesses, MaxThreads,
// MaxArrayEntries, MaxEntryBytes: refused before they are allocated), and
// one in which two files share an id.
func Decode(rd io.Reader) (*Record, error) { return DecodeLimit(rd, MaxDecodedBytes) }

// DecodeLimit is Decode with another bound on the decompressed size.
func DecodeLimit(rd io.Reader, limit int64) (*Record, error) {
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
	lr := &limitReader{r: src, left: limit, limit: limit}
	var r Record
	dec := json.NewDecoder(&scanningReader{r: lr, s: newLimitScanner(reflect.TypeFor[Record]())})
	if err := dec.Decode(&r); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("decode record (corrupt or truncated?): %w", err)
	}
	if err := onlySpace(io.MultiReader(dec.Buffered(), lr)); err != nil {
		return nil, err
	}
	if r.Schema != Schema && r.Schema != schemaV1 {
		if r.Schema == "" {
			return nil, fmt.Errorf("%w: no schema field", ErrSchema)
		}
		if !strings.HasPrefix(r.Schema, "coldtrace.record/") {
			return nil, fmt.Errorf("%w: schema %q", ErrSchema, r.Schema)
		}
		return nil, fmt.Errorf("%w: schema %q, this build reads %q", ErrSchema, r.Schema, Schema)
	}
	// An older record is a current one: what v2 added is optional.
	r.Schema = Schema
	var err error
	if r.Command, err = argsFromJSON(r.Command, r.CommandB64); err != nil {
		return nil, fmt.Errorf("decode record: command_b64: %w", err)
	}
	r.CommandB64 = nil
	if err := r.indexFiles(); err != nil {
		return nil, err
	}
	return &r, nil
}

// onlySpace reads rd to its end and fails on anything but JSON white
// space. Reading to the end also makes gzip check its checksum, and
// garbage after the compressed stream fails there.
func onlySpace(rd io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := rd.Read(buf)
		for _, c := range buf[:n] {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return errors.New("trailing data after the record: a record file holds one record and nothing else")
			}
		}
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, ErrTooLarge):
			return err
		case err != nil:
			return fmt.Errorf("trailing data after the record, or a corrupt compressed stream: %w", err)
		}
	}
}

// limitReader fails with ErrTooLarge, rather than ending quietly as
// io.LimitReader does, once more than limit bytes were read.
type limitReader struct {
	r           io.Reader
	left, limit int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a record of exactly limit bytes from a
		// larger one.
		var one [1]byte
		if _, err := io.ReadFull(l.r, one[:]); err != nil {
			return 0, err
		}
		size := fmt.Sprintf("%d bytes", l.limit)
		if l.limit >= 1<<20 {
			size = fmt.Sprintf("%d MiB", l.limit>>20)
		}
		return 0, fmt.Errorf("%w: above %s decompressed, the most coldtrace reads (README, \"Design\")", ErrTooLarge, size)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
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

// WriteFile writes r to path, for tests and tools that make records.
// coldtrace's own outputs go through internal/outfile, which writes with
// the rights of the user coldtrace acts for and replaces only regular
// files.
func WriteFile(path string, r *Record) error {
	var buf bytes.Buffer
	if err := Encode(&buf, r); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
