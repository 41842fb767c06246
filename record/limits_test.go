package record

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// gzipRecord compresses a record whose text is head, then n copies of
// entry separated by commas, then tail.
func gzipRecord(t *testing.T, head, entry, tail string, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(zw, head)
	chunk := []byte(strings.Repeat(entry+",", 4096))
	for done := 0; done+4096 < n; done += 4096 {
		zw.Write(chunk)
	}
	io.WriteString(zw, strings.Repeat(entry+",", (n-1)%4096)+entry)
	io.WriteString(zw, tail)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// allocatedBy is how many bytes f allocated on the heap, all of them
// counted (TotalAlloc only grows): an upper bound on the peak it caused.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const hostileAllocBound = 200 << 20

// TestManyEmptyFilesRefusedBeforeAllocating: ten million empty file
// objects (30 MB of JSON in a gzip of some 40 KB) are refused, the error
// naming the bound on files, with under 200 MiB allocated in all: the
// entries are counted as the text is read, before any File exists.
func TestManyEmptyFilesRefusedBeforeAllocating(t *testing.T) {
	data := gzipRecord(t, `{"schema":"coldtrace.record/v1","files":[`, "{}", "]}", 10_000_000)
	if len(data) > 64<<10 {
		t.Fatalf("the hostile record is %d bytes compressed, want a small one", len(data))
	}
	var err error
	alloc := allocatedBy(func() { _, err = Decode(bytes.NewReader(data)) })
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("10M empty files: %v, want ErrTooLarge", err)
	}
	for _, want := range []string{"files holds more than 2097152 entries", "record.MaxFiles"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if alloc > hostileAllocBound {
		t.Errorf("refusing it allocated %d MiB, want under %d MiB", alloc>>20, hostileAllocBound>>20)
	}
	t.Logf("%d bytes compressed, refused with %.1f MiB allocated", len(data), float64(alloc)/(1<<20))
}

// TestLimitsFollowJSONKeyMatching: the decoder matches keys without
// regard to case and after unescaping, and so does the count.
func TestLimitsFollowJSONKeyMatching(t *testing.T) {
	for _, key := range []string{`FILES`, `Files`, `fil\u0065s`} {
		data := gzipRecord(t, `{"schema":"coldtrace.record/v1","`+key+`":[`, "{}", "]}", MaxFiles+1)
		_, err := Decode(bytes.NewReader(data))
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "record.MaxFiles") {
			t.Errorf("key %q: %v, want the bound on files", key, err)
		}
	}
	// At the bound, the same text decodes.
	data := gzipRecord(t, `{"schema":"coldtrace.record/v1","Files":[`, `{"id":0}`, "]}", 2)
	if _, err := Decode(bytes.NewReader(data)); err == nil || errors.Is(err, ErrTooLarge) {
		t.Errorf("two files with id 0: %v, want a duplicate-id error", err)
	}
}

// TestOtherArraysBounded: the strings of a process's arguments and the
// keys of a map are bounded per array, and entries spread over many
// arrays (thread deltas across samples) by their memory together; each
// error names its bound and where it was reached, and little is
// allocated before it.
func TestOtherArraysBounded(t *testing.T) {
	for _, c := range []struct {
		name             string
		head, entry, end string
		n                int
		want             []string
	}{
		{"arguments", `{"schema":"coldtrace.record/v1","processes":[{"pid":1,"args":[`, `""`, "]}]}", MaxArrayEntries + 1,
			[]string{"processes[].args holds more than 4194304 entries", "record.MaxArrayEntries"}},
		{"labels", `{"schema":"coldtrace.record/v1","labels":{`, `"":""`, "}}", MaxArrayEntries + 1,
			[]string{"labels holds more than 4194304 entries", "record.MaxArrayEntries"}},
		{"deltas", `{"schema":"coldtrace.record/v1","samples":[`, `{"th":[` + strings.Repeat("{},", 999) + `{}]}`, "]}", 20_000,
			[]string{"more than 1024 MiB in memory at samples[].th", "record.MaxEntryBytes"}},
	} {
		data := gzipRecord(t, c.head, c.entry, c.end, c.n)
		var err error
		alloc := allocatedBy(func() { _, err = Decode(bytes.NewReader(data)) })
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
		if alloc > hostileAllocBound {
			t.Errorf("%s: refusing it allocated %d MiB, want under %d MiB", c.name, alloc>>20, hostileAllocBound>>20)
		}
	}
}

// millionFiles is a record of n files with paths and counters, their ids
// shuffled (no file at the position its id names) when shuffle is set,
// and a sample that names every file.
func millionFiles(n int, shuffle bool) *Record {
	r := &Record{Schema: Schema, Command: []string{"big"}, WallNS: 1e9, IntervalNS: 1e8, Host: Host{PageSize: 4096}}
	r.Files = make([]File, n)
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	if shuffle {
		// A permutation without fixed points: no file at the position
		// its id names.
		ids = rand.New(rand.NewSource(1)).Perm(n)
		for i := range ids {
			if ids[i] == i {
				j := (i + 1) % n
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	s := Sample{EndNS: 1e9}
	for i := range r.Files {
		r.Files[i] = File{ID: ids[i], Dev: 8 << 20, Ino: uint64(1000 + i), Path: fmt.Sprintf("/data/set/%07d.bin", ids[i]),
			SizeBytes: 1 << 16, PagesAccessed: 16, PagesMissed: uint64(i % 17), BytesFromDisk: uint64(i%17) << 12,
			IOWaitNS: int64(i % 1000), MissCPUNS: int64(i % 300)}
		s.Files = append(s.Files, FileDelta{File: ids[i], PagesAccessed: 16, PagesMissed: uint64(i % 17), IOWaitNS: int64(i % 1000)})
	}
	r.Samples = []Sample{s}
	return r
}

// TestMillionShuffledFilesDecodeAndIndex: a record of 10^6 files whose
// ids are not their positions decodes, and every file is found by its
// id (through the index, not a search each: 10^6 searches of 10^6 files
// would not finish in the test's time).
func TestMillionShuffledFilesDecodeAndIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("a record of a million files: not in -short")
	}
	var buf bytes.Buffer
	if err := Encode(&buf, millionFiles(1_000_000, true)); err != nil {
		t.Fatal(err)
	}
	r, err := Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("a million files: %v", err)
	}
	if len(r.fileIndex) != len(r.Files) {
		t.Fatalf("index of %d ids for %d files", len(r.fileIndex), len(r.Files))
	}
	found := 0
	for _, d := range r.Samples[0].Files {
		if f := r.FileByID(d.File); f != nil && f.ID == d.File {
			found++
		}
	}
	if found != 1_000_000 {
		t.Errorf("found %d of 1000000 files by id", found)
	}
	if r.FileByID(1_000_000) != nil || r.FileByID(-1) != nil {
		t.Error("an id no file has was found")
	}
}

// TestDuplicateFileIDsRefused: two files with one id are a corrupt
// record, whichever files they are; ids in place need no index.
func TestDuplicateFileIDsRefused(t *testing.T) {
	for _, files := range []string{
		`[{"id":0,"path":"/a"},{"id":0,"path":"/b"}]`,
		`[{"id":5,"path":"/a"},{"id":3},{"id":5,"path":"/c"}]`,
		`[{"id":1},{"id":1}]`,
	} {
		_, err := Decode(strings.NewReader(`{"schema":"coldtrace.record/v1","files":` + files + `}`))
		if err == nil || !strings.Contains(err.Error(), "both have id") {
			t.Errorf("files %s: %v, want a duplicate-id error", files, err)
		}
	}
	r, err := Decode(strings.NewReader(`{"schema":"coldtrace.record/v1","files":[{"id":0},{"id":1}]}`))
	if err != nil || r.fileIndex != nil || r.FileByID(1) != &r.Files[1] {
		t.Errorf("files in place: %v, index %v", err, r.fileIndex)
	}
	r, err = Decode(strings.NewReader(`{"schema":"coldtrace.record/v1","files":[{"id":7},{"id":3}]}`))
	if err != nil || r.FileByID(3) != &r.Files[1] || r.FileByID(7) != &r.Files[0] || r.FileByID(0) != nil {
		t.Errorf("files out of place: %v", err)
	}
}

// TestInterfaceValuesBounded: a value decoded into an interface (maps
// and slices of any, all the way down) is counted like the rest.
func TestInterfaceValuesBounded(t *testing.T) {
	type withAny struct {
		Extra any `json:"extra"`
	}
	for _, c := range []struct{ head, entry, end string }{
		{`{"extra":[`, "[]", "]}"},
		{`{"extra":{"a":{`, `"":0`, "}}}"},
	} {
		var buf bytes.Buffer
		buf.WriteString(c.head)
		buf.WriteString(strings.Repeat(c.entry+",", MaxArrayEntries) + c.entry)
		buf.WriteString(c.end)
		sc := newLimitScanner(reflect.TypeFor[withAny]())
		err := sc.scan(buf.Bytes())
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "record.MaxArrayEntries") {
			t.Errorf("%s…: %v, want the bound on entries", c.head, err)
		}
	}
}
