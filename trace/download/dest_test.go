package download

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// fileKey is path's file as the probes name it.
func fileKey(t *testing.T, path string) FileKey {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	k := FileKey{Dev: kernelDev(&st), Ino: st.Ino}
	if f, err := os.Open(path); err == nil {
		if gen, err := probe.InodeGeneration(int(f.Fd())); err == nil {
			k.Gen = gen
		}
		f.Close()
	}
	return k
}

// TestHandleFollowsARenameIntoAnotherDirectory: a handle taken while the
// file is open under its temporary name finds it at the end under its
// final name in another directory; a deleted file is gone.
func TestHandleFollowsARenameIntoAnotherDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("open_by_handle_at needs CAP_DAC_READ_SEARCH: run as root")
	}
	dir := t.TempDir()
	stage, final := filepath.Join(dir, "stage", "blobs"), filepath.Join(dir, "hub", "blobs")
	for _, d := range []string{stage, final} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tmp, gone := filepath.Join(stage, "abc.incomplete"), filepath.Join(stage, "deleted.tmp")
	var keys []FileKey
	for _, p := range []string{tmp, gone} {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		keys = append(keys, fileKey(t, p))
	}
	hs := newHandles()
	defer hs.Close()
	hs.TakeOpen(int32(os.Getpid()))
	blob := filepath.Join(final, "abc")
	if err := os.Rename(tmp, blob); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	p, isGone, err := hs.Resolve(handleKey(keys[0]))
	if err != nil || p != blob || isGone {
		t.Errorf("renamed file: %q, gone %v, %v; want %s", p, isGone, err, blob)
	}
	if hs.First(handleKey(keys[0])) != tmp {
		t.Errorf("first name %q, want %s", hs.First(handleKey(keys[0])), tmp)
	}
	if _, isGone, err := hs.Resolve(handleKey(keys[1])); err != nil || !isGone {
		t.Errorf("deleted file: gone %v, %v; want gone", isGone, err)
	}
}

const mib = 1 << 20

// part is a connection of pid that received bytes from first to last
// (ms), in 64 KiB receives.
func part(sk uint64, pid int32, first, last int64, bytes uint64) Conn {
	return Conn{Sk: sk, ID: sk, PID: pid, TID: pid, RxTID: pid, FirstTS: uint64(first * ms), LastTS: uint64(last * ms),
		Bytes: bytes, Receives: bytes / (64 << 10), Sent: 100}
}

// createdSamples are 100 ms samples in which file id's pages created are
// perPoll[i] bytes in the i-th sample.
func createdSamples(id int, perPoll ...uint64) []record.Sample {
	var out []record.Sample
	for i, b := range perPoll {
		s := record.Sample{EndNS: int64(i+1) * 100 * ms}
		if b > 0 {
			s.Files = []record.FileDelta{{File: id, PagesCreated: b / 4096}}
		}
		out = append(out, s)
	}
	return out
}

// TestChunkedPartsAreOneDownload: 8 connections of 2 MiB each, none a
// download alone, whose bytes one file's writes follow, are one 16 MiB
// download with 8 connections, timed by the union of their spans.
func TestChunkedPartsAreOneDownload(t *testing.T) {
	var conns []Conn
	progress := map[ConnKey][]Progress{}
	for i := range 8 {
		c := part(uint64(100+i), 10, 50+int64(i)*10, 250+int64(i)*10, 2*mib)
		conns = append(conns, c)
		progress[ConnKey{c.Sk, c.ID}] = []Progress{{TS: uint64(150 * ms), Bytes: 1 * mib}}
	}
	files := []record.File{{ID: 0, Dev: 8, Ino: 1}, {ID: 1, Dev: 8, Ino: 2}}
	samples := createdSamples(0, 0, 8*mib, 8*mib, 0)
	samples[0].Files = append(samples[0].Files, record.FileDelta{File: 1, PagesCreated: 1}) // a log line
	got := Build(conns, nil, Env{Samples: samples, IntervalNS: 100 * ms, Files: files, PageSize: 4096, Progress: progress,
		Locate: func(k FileKey) Located { return Located{Path: "/f/" + strconv.FormatUint(k.Ino, 10)} }})
	if len(got) != 1 {
		t.Fatalf("%d downloads, want 1: %+v", len(got), got)
	}
	d := got[0]
	if d.Bytes != 16*mib || len(d.Connections) != 8 || d.StartNS != 50*ms || d.EndNS != 320*ms {
		t.Errorf("download of %d bytes over %d connections in [%d, %d]; want 16 MiB over 8 in [50 ms, 320 ms]", d.Bytes,
			len(d.Connections), d.StartNS, d.EndNS)
	}
	if d.Destination != record.DestFile || d.Path != "/f/1" || len(d.Files) != 1 || d.Files[0].BytesWritten != 16*mib {
		t.Errorf("destination %s %q, files %+v; want file /f/1 of 16 MiB", d.Destination, d.Path, d.Files)
	}
	want := []record.DownloadSample{{EndNS: 150 * ms, Bytes: 8 * mib}}
	for i := range 8 {
		want = append(want, record.DownloadSample{EndNS: (250 + int64(i)*10) * ms, Bytes: mib})
	}
	if !slices.Equal(d.Samples, want) {
		t.Errorf("samples %+v, want %+v", d.Samples, want)
	}
}

// TestTwoDownloadsAtOnceStayApart: two 8 MiB connections of one process
// at once, each receiving thread writing its own file, are two
// downloads; two at once into memory are two as well.
func TestTwoDownloadsAtOnceStayApart(t *testing.T) {
	a, b := part(1, 10, 0, 300, 8*mib), part(2, 10, 10, 310, 8*mib)
	b.RxTID = 11
	writes := []Write{{Sk: 1, ID: 1, Dev: 8, Ino: 1, Bytes: 8 * mib, FirstTS: 0, LastTS: uint64(300 * ms)},
		{Sk: 2, ID: 2, Dev: 8, Ino: 2, Bytes: 8 * mib, FirstTS: uint64(10 * ms), LastTS: uint64(310 * ms)}}
	files := []record.File{{ID: 0, Dev: 8, Ino: 1}, {ID: 1, Dev: 8, Ino: 2}}
	samples := createdSamples(0, 2*mib, 3*mib, 3*mib, 0)
	for i, s := range createdSamples(1, 2*mib, 3*mib, 3*mib, 0) {
		samples[i].Files = append(samples[i].Files, s.Files...)
	}
	got := Build([]Conn{a, b}, writes, Env{Samples: samples, IntervalNS: 100 * ms, Files: files, PageSize: 4096})
	if len(got) != 2 || got[0].Files[0].Ino != 1 || got[1].Files[0].Ino != 2 || got[0].Destination != record.DestFile {
		t.Errorf("got %+v, want two downloads into files 1 and 2", got)
	}
	got = Build([]Conn{a, b}, nil, Env{IntervalNS: 100 * ms})
	if len(got) != 2 || got[0].Destination != record.DestMemory || got[1].Destination != record.DestMemory {
		t.Errorf("got %+v, want two downloads kept in memory", got)
	}
}

// TestMatchDestination: the destination is the file whose writes follow
// the received bytes and total them within max(64 KiB, 0.5%); a file
// written before the body arrived, or ahead of it, is not; a file
// written N times the body while it arrived is it, expanded; a body of
// which under a tenth was written anywhere was kept in memory; else the
// destination was not seen and the candidates say what was written.
func TestMatchDestination(t *testing.T) {
	rx := []record.DownloadSample{{EndNS: 100 * ms, Bytes: 4 * mib}, {EndNS: 200 * ms, Bytes: 4 * mib}, {EndNS: 300 * ms, Bytes: 4 * mib}}
	w := window{start: 10 * ms, end: 300 * ms, interval: 100 * ms}
	series := func(k uint64, pts ...point) written { return written{Key: FileKey{Dev: 8, Ino: k}, Points: pts} }
	cases := []struct {
		name  string
		files []written
		kind  string
		key   uint64
		n     float64
	}{
		{"follows", []written{series(1, point{200 * ms, 4 * mib}, point{300 * ms, 8 * mib})}, record.DestFile, 1, 0},
		{"within tolerance", []written{series(1, point{300 * ms, 12*mib - 60<<10})}, record.DestFile, 1, 0},
		{"written out after the last byte", []written{series(1, point{2300 * ms, 12 * mib})}, record.DestFile, 1, 0},
		{"too late", []written{series(1, point{2500 * ms, 12 * mib})}, record.DestMemory, 0, 0},
		{"written before", []written{series(1, point{0, mib}, point{200 * ms, 11 * mib})}, record.DestNotSeen, 0, 0},
		{"ahead of the body", []written{series(1, point{100 * ms, 12 * mib})}, record.DestNotSeen, 0, 0},
		{"expanded", []written{series(1, point{100 * ms, 16 * mib}, point{200 * ms, 16 * mib}, point{300 * ms, 16 * mib})},
			record.DestExpanded, 1, 4},
		{"short", []written{series(1, point{300 * ms, 6 * mib})}, record.DestNotSeen, 0, 0},
		{"a log beside it", []written{series(1, point{300 * ms, 12 * mib}), series(2, point{100 * ms, 4096})}, record.DestFile, 1, 0},
		{"memory", []written{series(2, point{100 * ms, mib})}, record.DestMemory, 0, 0},
	}
	for _, tc := range cases {
		d := match(12*mib, rx, w, tc.files, nil, nil)
		if d.kind != tc.kind || (tc.key != 0 && d.key.Ino != tc.key) || d.expansion != tc.n {
			t.Errorf("%s: %s file %d expanded %.2f×, want %s file %d %.2f×", tc.name, d.kind, d.key.Ino, d.expansion, tc.kind, tc.key, tc.n)
		}
		if d.kind == record.DestNotSeen && len(d.candidates) != len(tc.files) {
			t.Errorf("%s: candidates %+v, want %d", tc.name, d.candidates, len(tc.files))
		}
	}
}

// TestMatchWaitsForTheNextReceivedCount: when the polls that read the
// received count ran late (350 ms apart on a loaded machine, the interval
// 100 ms), the sizes read between them, every 5 ms, and the pages created
// read in the same poll as the earlier count, are held to the next count
// read, not to one interval later; a file ahead of that count is still
// not the destination.
func TestMatchWaitsForTheNextReceivedCount(t *testing.T) {
	rx := []record.DownloadSample{{EndNS: 100 * ms, Bytes: 4 * mib}, {EndNS: 450 * ms, Bytes: 8 * mib}}
	w := window{start: 10 * ms, end: 450 * ms, interval: 100 * ms}
	written := func(pts ...point) []written { return []written{{Key: FileKey{Dev: 8, Ino: 1}, Points: pts}} }
	if d := match(12*mib, rx, w, written(point{200 * ms, 7 * mib}, point{300 * ms, 5 * mib}), nil, nil); d.kind != record.DestFile {
		t.Errorf("written between two late polls: %s, want %s", d.kind, record.DestFile)
	}
	// Pages created dated by the poll that read the count at 100 ms were
	// read after it: the count at 450 ms holds them.
	if d := match(12*mib, rx, w, written(point{100 * ms, 7 * mib}, point{450 * ms, 5 * mib}), nil, nil); d.kind != record.DestFile {
		t.Errorf("written in the poll of the count before the late one: %s, want %s", d.kind, record.DestFile)
	}
	if d := match(12*mib, rx, w, written(point{50 * ms, 12 * mib}), nil, nil); d.kind != record.DestNotSeen {
		t.Errorf("written ahead of the first count: %s, want %s", d.kind, record.DestNotSeen)
	}
}

// TestMoveToAnotherFilesystemIsFollowed: a destination copied to another
// filesystem and then deleted is named by the copy, with its first name
// beside it; a copy of another size is not it.
func TestMoveToAnotherFilesystemIsFollowed(t *testing.T) {
	c := part(1, 10, 0, 250, 12*mib)
	files := []record.File{{ID: 0, Dev: 8, Ino: 1}, {ID: 1, Dev: 9, Ino: 2}}
	samples := createdSamples(0, 4*mib, 4*mib, 4*mib, 0, 0)
	for i, s := range createdSamples(1, 0, 0, 0, 12*mib, 0) {
		samples[i].Files = append(samples[i].Files, s.Files...)
	}
	locate := func(k FileKey) Located {
		if k.Ino == 1 {
			return Located{Path: "/stage/blob.incomplete", Gone: true}
		}
		return Located{Path: "/other/blob"}
	}
	env := Env{Samples: samples, IntervalNS: 100 * ms, Files: files, PageSize: 4096, Locate: locate,
		Progress: map[ConnKey][]Progress{{1, 1}: {{TS: uint64(150 * ms), Bytes: 6 * mib}}}}
	got := Build([]Conn{c}, nil, env)
	if len(got) != 1 || got[0].Path != "/other/blob" || got[0].Files[0].WrittenPath != "/stage/blob.incomplete" || got[0].Files[0].Gone ||
		got[0].Files[0].Ino != 2 {
		t.Errorf("got %+v, want the copy /other/blob first written as /stage/blob.incomplete", got)
	}
	samples[3].Files[len(samples[3].Files)-1].PagesCreated = 6 * mib / 4096
	got = Build([]Conn{c}, nil, env)
	if len(got) != 1 || got[0].Path != "/stage/blob.incomplete" || !got[0].Files[0].Gone {
		t.Errorf("got %+v, want the deleted destination: the copy is half its size", got)
	}
}

// TestARetryIsNoCopy: a file written as a deleted destination's writes
// ended, of its size, is no copy of it when it has the destination's
// inode number (given to it after the delete), another download's
// receiving thread wrote it (a retry), or it is on the destination's
// filesystem under another name; otherwise it is the moved copy.
func TestARetryIsNoCopy(t *testing.T) {
	dest := FileKey{Dev: 8, Ino: 1, Gen: 5}
	series := func(k FileKey) written { return written{Key: k, Points: []point{{200 * ms, 12 * mib}}} }
	destWrites := written{Key: dest, Points: []point{{100 * ms, 12 * mib}}}
	reused, other := FileKey{Dev: 8, Ino: 1, Gen: 6}, FileKey{Dev: 9, Ino: 2}
	if k, ok := movedCopy(dest, []written{destWrites, series(reused)}, 100*ms, nil, nil); ok {
		t.Errorf("the file given the destination's number is its copy %+v", k)
	}
	// On the destination's filesystem a move is a rename: a file
	// written from the destination there under another name is made of
	// it (an unpacked member), not the destination moved; under its
	// name (git's pack.temp copied to its .pack) it is the copy.
	same := FileKey{Dev: 8, Ino: 3}
	if k, ok := movedCopy(dest, []written{destWrites, series(same)}, 100*ms, nil, func(FileKey) bool { return false }); ok {
		t.Errorf("a file of the destination's filesystem, named otherwise, is its copy %+v", k)
	}
	if k, ok := movedCopy(dest, []written{destWrites, series(same)}, 100*ms, nil, func(k FileKey) bool { return k == same }); !ok || k != same {
		t.Errorf("copy %+v (%v), want the destination's namesake %+v", k, ok, same)
	}
	if k, ok := movedCopy(dest, []written{destWrites, series(other)}, 100*ms, map[FileKey]bool{other: true}, nil); ok {
		t.Errorf("another download's body is the destination's copy %+v", k)
	}
	if k, ok := movedCopy(dest, []written{destWrites, series(other)}, 100*ms, nil, nil); !ok || k != other {
		t.Errorf("copy %+v (%v), want %+v", k, ok, other)
	}
}

// TestLocateTakesTheRecordsFinalName: a file the page-cache sensor
// followed across a rename (FirstPath set) is located under its final
// name with its first beside it, though the download sensor took no
// handle of it.
func TestLocateTakesTheRecordsFinalName(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "hub", "blob")
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(final, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := fileKey(t, final)
	first := filepath.Join(dir, "stage", "blob.incomplete")
	locate := fileLocator([]record.File{{Dev: k.Dev, Ino: k.Ino, Gen: k.Gen, Path: final, FirstPath: first}}, nil, nil)
	if l := locate(k); l != (Located{Path: final, WrittenPath: first}) {
		t.Errorf("located %+v, want %s first named %s", l, final, first)
	}
}

// TestSmallFetchBesideADownloadLeavesIt: a 1 MiB fetch that overlapped a
// 24 MiB download and wrote nothing does not take the download's
// destination away: the download is its one connection, into its file.
func TestSmallFetchBesideADownloadLeavesIt(t *testing.T) {
	big, small := part(1, 10, 0, 250, 24*mib), part(2, 10, 50, 100, mib)
	files := []record.File{{ID: 0, Dev: 8, Ino: 1}}
	samples := createdSamples(0, 8*mib, 8*mib, 8*mib, 0)
	progress := map[ConnKey][]Progress{{1, 1}: {{TS: uint64(100 * ms), Bytes: 8 * mib}, {TS: uint64(200 * ms), Bytes: 16 * mib}}}
	got := Build([]Conn{big, small}, nil, Env{Samples: samples, IntervalNS: 100 * ms, Files: files, PageSize: 4096, Progress: progress})
	if len(got) != 1 || got[0].Bytes != 24*mib || len(got[0].Connections) != 1 || got[0].Destination != record.DestFile ||
		got[0].Files[0].Ino != 1 {
		t.Errorf("got %+v, want one 24 MiB download of one connection into file 1", got)
	}
}

// TestBodyFileBeatsAFileWrittenFromIt: pip receives a wheel into a
// temporary file and then unpacks it; a member stored uncompressed is the
// wheel's size to within a page. The destination is the file the
// receiving thread wrote as the body arrived, not the one it wrote from
// it after the last byte, however close the sizes.
func TestBodyFileBeatsAFileWrittenFromIt(t *testing.T) {
	body := uint64(12*mib + 300) // the response's headers too
	c := part(1, 10, 10, 105, body)
	writes := []Write{
		{Sk: 1, ID: 1, Dev: 8, Ino: 1, Bytes: 12*mib + 4096, FirstTS: uint64(20 * ms), LastTS: uint64(105 * ms)},
		{Sk: 1, ID: 1, Dev: 8, Ino: 2, Bytes: 12 * mib, FirstTS: uint64(110 * ms), LastTS: uint64(130 * ms)},
	}
	files := []record.File{{ID: 0, Dev: 8, Ino: 1}, {ID: 1, Dev: 8, Ino: 2}}
	samples := createdSamples(0, 10*mib, 2*mib+4096)
	samples[1].Files = append(samples[1].Files, record.FileDelta{File: 1, PagesCreated: 12 * mib / 4096})
	got := Build([]Conn{c}, writes, Env{Samples: samples, IntervalNS: 100 * ms, Files: files, PageSize: 4096})
	if len(got) != 1 || got[0].Destination != record.DestFile || got[0].Files[0].Ino != 1 {
		t.Fatalf("got %+v, want one download into file 1 (the wheel)", got)
	}
	// Written only after the last byte, it is still the destination
	// when nothing was written as the body arrived (a body kept in
	// memory and written out).
	got = Build([]Conn{c}, writes[1:], Env{Samples: createdSamples(1, 0, 12*mib), IntervalNS: 100 * ms, Files: files, PageSize: 4096})
	if len(got) != 1 || got[0].Destination != record.DestFile || got[0].Files[0].Ino != 2 {
		t.Errorf("got %+v, want the file written out after the last byte", got)
	}
}

func TestNamedAsMoved(t *testing.T) {
	for _, tc := range []struct {
		copy, dest string
		want       bool
	}{
		{"/r/.git/objects/pack/pack-1.pack", "/r/.git/objects/pack/pack-1.pack.temp", true},
		{"/mnt/b/hub/blobs/e7", "/mnt/a/hub/blobs/e7.incomplete", true},
		{"/mnt/b/model.bin", "/mnt/a/model.bin", true},
		{"/t/target/pkg/blob.bin", "/tmp/pip-unpack-1/pkg-1.0-py3-none-any.whl", false},
		{"/t/pack-1", "/r/pack-10.temp", false},
		{"", "/a/x", false},
	} {
		if got := namedAsMoved(tc.copy, tc.dest); got != tc.want {
			t.Errorf("namedAsMoved(%q, %q) = %v, want %v", tc.copy, tc.dest, got, tc.want)
		}
	}
}

// TestUnpackedArchiveIsADestination: `curl | tar -x` writes the body
// into several new files, none of them its size: together they follow
// the received bytes and hold most of them, so they are its destination
// (unpacked), under the directory they share; one written before the
// body arrived, or too little of it, is not an unpacked archive, nor are
// files of unrelated directories; a small file elsewhere is left out.
func TestUnpackedArchiveIsADestination(t *testing.T) {
	rx := []record.DownloadSample{{EndNS: 100 * ms, Bytes: 4 * mib}, {EndNS: 200 * ms, Bytes: 4 * mib}, {EndNS: 300 * ms, Bytes: 4 * mib}}
	w := window{start: 10 * ms, end: 300 * ms, interval: 100 * ms}
	series := func(k uint64, pts ...point) written { return written{Key: FileKey{Dev: 8, Ino: k}, Points: pts} }
	weights := series(1, point{100 * ms, 3 * mib}, point{200 * ms, 4 * mib}, point{300 * ms, 2 * mib})
	extra := series(2, point{300 * ms, 2*mib + 900<<10})
	d := match(12*mib, rx, w, []written{extra, weights}, nil, nil)
	if d.kind != record.DestUnpacked || len(d.unpacked) != 2 || d.unpacked[0].key.Ino != 1 || d.bytes != 11*mib+900<<10 {
		t.Fatalf("got %s %+v (%d bytes), want unpacked into files 1 and 2", d.kind, d.unpacked, d.bytes)
	}
	if d := match(12*mib, rx, w, []written{series(2, point{0, 4096}, point{300 * ms, 3 * mib}), weights}, nil, nil); d.kind == record.DestUnpacked {
		t.Errorf("a file written before the body arrived: %s", d.kind)
	}
	if d := match(12*mib, rx, w, []written{series(2, point{300 * ms, mib}), weights}, nil, nil); d.kind == record.DestUnpacked {
		t.Errorf("files holding 10 of 12 MiB: %s", d.kind)
	}
	// Ahead of the body: 15 MiB written by 100 ms, when 4 had arrived
	// (8 by the next count).
	if d := match(12*mib, rx, w, []written{series(2, point{100 * ms, 12 * mib}), weights}, nil, nil); d.kind == record.DestUnpacked {
		t.Errorf("files ahead of the body: %s", d.kind)
	}

	locate := func(dir string) func(FileKey) Located {
		return func(k FileKey) Located {
			return Located{Path: map[uint64]string{1: "/data/model/weights.bin", 2: dir + "/extra.bin"}[k.Ino]}
		}
	}
	if dir, fs := unpackedTree(d.unpacked, 12*mib, locate("/data/model/sub")); dir != "/data/model" || len(fs) != 2 || fs[0].Path != "/data/model/weights.bin" {
		t.Errorf("tree %s %+v, want /data/model with weights.bin first", dir, fs)
	}
	if dir, fs := unpackedTree(d.unpacked, 12*mib, locate("/var/log")); fs != nil {
		t.Errorf("files in unrelated directories make a tree %s %+v", dir, fs)
	}
	// A small file the same process wrote elsewhere meanwhile (bytecode,
	// a log) is left out of a tree the rest holds: three files in
	// blobs/, 11.9 of 12 MiB, and 64 KiB under /usr/lib.
	blobs := []candidate{{key: FileKey{Ino: 1}, bytes: 8 * mib}, {key: FileKey{Ino: 3}, bytes: 64 << 10}, {key: FileKey{Ino: 2}, bytes: 3*mib + 900<<10}, {key: FileKey{Ino: 4}, bytes: 4096}}
	where := map[uint64]string{1: "/hub/m/blobs/aa", 2: "/hub/m/blobs/bb", 3: "/usr/lib/python3/__pycache__/x.pyc", 4: "/hub/m/blobs/cc"}
	dir, fs := unpackedTree(blobs, 12*mib, func(k FileKey) Located { return Located{Path: where[k.Ino]} })
	if dir != "/hub/m/blobs" || len(fs) != 3 || fs[0].Path != "/hub/m/blobs/aa" || fs[1].Path != "/hub/m/blobs/bb" {
		t.Errorf("tree %s %+v, want /hub/m/blobs with its three files, the .pyc left out", dir, fs)
	}
}

// TestBodyBufferedInATempfileIsNamedByItsOtherFile: pip's HTTP cache
// buffers a response it may keep in a tempfile ("tmpk3x9_q2a") while pip
// writes the same bytes to the wheel; either fits the body, and the
// wheel's name is the one that says what was downloaded.
func TestBodyBufferedInATempfileIsNamedByItsOtherFile(t *testing.T) {
	c := part(1, 10, 10, 105, 12*mib+300)
	writes := []Write{
		{Sk: 1, ID: 1, Dev: 8, Ino: 1, Bytes: 12*mib + 4096, FirstTS: uint64(20 * ms), LastTS: uint64(105 * ms)},
		{Sk: 1, ID: 1, Dev: 8, Ino: 2, Bytes: 12*mib + 4096, FirstTS: uint64(20 * ms), LastTS: uint64(105 * ms)},
	}
	files := []record.File{{ID: 0, Dev: 8, Ino: 1}, {ID: 1, Dev: 8, Ino: 2}}
	samples := createdSamples(0, 10*mib, 2*mib+4096)
	for i, s := range createdSamples(1, 10*mib, 2*mib+4096) {
		samples[i].Files = append(samples[i].Files, s.Files...)
	}
	names := map[uint64]string{1: "/tmp/tmpk3x9_q2a", 2: "/tmp/pip-unpack-x/p-1.0-py3-none-any.whl"}
	for _, order := range [][]Write{writes, {writes[1], writes[0]}} {
		got := Build([]Conn{c}, order, Env{Samples: samples, IntervalNS: 100 * ms, Files: files, PageSize: 4096,
			Locate: func(k FileKey) Located { return Located{Path: names[k.Ino], Gone: true} }})
		if len(got) != 1 || got[0].Path != names[2] {
			t.Errorf("got %+v, want the wheel %s", got, names[2])
		}
	}
	for name, want := range map[string]bool{"/tmp/tmpk3x9_q2a": true, "/c/tmpabcdefgh": true, "/c/tmpABCDEFGH": false,
		"/c/tmp12345": false, "/c/model.bin": false} {
		if got := anonymousTemp(name); got != want {
			t.Errorf("anonymousTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestFitsAllowsFramingBelowTheBodyOnly: a connection receives its
// body's framing too (TLS records, chunked encoding: up to about 2%), so
// a file may hold that much less than was received, but no more than
// the tolerance's 0.5% beyond it.
func TestFitsAllowsFramingBelowTheBodyOnly(t *testing.T) {
	const r = 100 << 20
	cases := []struct {
		name    string
		written uint64
		recv    uint64
		want    bool
	}{
		{"the body exactly", r, r, true},
		{"0.5% more", r + r/200, r, true},
		{"1% more", r + r/100, r, false},
		{"2.4% less (1.4 KB TLS records, chunked)", r - r*24/1000, r, true},
		{"3% less", r - r*3/100, r, false},
		{"a small body 60 KiB short (a certificate chain)", 1<<20 - 60<<10, 1 << 20, true},
	}
	for _, c := range cases {
		if got := fits(c.written, c.recv, 0); got != c.want {
			t.Errorf("%s: fits(%d, %d) = %v, want %v", c.name, c.written, c.recv, got, c.want)
		}
	}
}
