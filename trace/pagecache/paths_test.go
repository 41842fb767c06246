package pagecache

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// mountTableOf parses mountinfo lines, each of which must parse.
func mountTableOf(t *testing.T, lines []string) mountTable {
	t.Helper()
	mt := mountTable{}
	for _, l := range lines {
		m, ok := parseMountInfoLine(l)
		if !ok {
			t.Fatalf("not parsed: %s", l)
		}
		mt[m.dev] = append(mt[m.dev], m)
	}
	return mt
}

func TestParseMountInfo(t *testing.T) {
	lines := []string{
		"22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw",
		"30 22 254:0 /srv/data /mnt/data rw - ext4 /dev/vda rw",
		"31 22 0:5 / /dev rw shared:2 - devtmpfs udev rw",
		`32 22 8:1 / /mnt/with\040space rw - xfs /dev/sda1 rw`,
	}
	mt := mountTableOf(t, lines)
	cases := []struct {
		dev    uint32
		fsPath string
		want   string
	}{
		{kernelDev(254, 0), "/etc/passwd", "/etc/passwd"},
		{kernelDev(254, 0), "/srv/data/model.bin", "/srv/data/model.bin"}, // the whole-fs mount wins
		{kernelDev(8, 1), "/x", "/mnt/with space/x"},
	}
	for _, c := range cases {
		got, ok := mt.resolve(c.dev, c.fsPath)
		if !ok || got != c.want {
			t.Errorf("resolve(%d, %s) = %q, %v; want %q", c.dev, c.fsPath, got, ok, c.want)
		}
	}
	if _, ok := mt.resolve(kernelDev(9, 9), "/x"); ok {
		t.Errorf("unknown device resolved")
	}
	// Only a bind mount of a subtree shows the file.
	only := mountTable{kernelDev(254, 0): {{dev: kernelDev(254, 0), root: "/srv/data", mountPoint: "/mnt/data"}}}
	if got, _ := only.resolve(kernelDev(254, 0), "/srv/data/m.bin"); got != "/mnt/data/m.bin" {
		t.Errorf("bind mount: %q", got)
	}
}

func TestFsPathFromNames(t *testing.T) {
	if got := fsPathFromNames([]string{"c", "b", "a"}, false); got != "/a/b/c" {
		t.Errorf("%q", got)
	}
	if got := fsPathFromNames([]string{"c"}, true); got != "…/c" {
		t.Errorf("%q", got)
	}
}

func TestDevEncodings(t *testing.T) {
	var st syscall.Stat_t
	if err := syscall.Stat("/", &st); err != nil {
		t.Skip(err)
	}
	k := userDevToKernel(st.Dev)
	major, minor := devMajorMinor(k)
	if uint64(major) != uint64((st.Dev>>8)&0xfff) || uint64(minor) != st.Dev&0xff|(st.Dev>>12)&^0xff {
		t.Errorf("st_dev %#x → kernel %#x → %d:%d", st.Dev, k, major, minor)
	}
}

func TestFindInProc(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "open.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	got := findInProc(int32(os.Getpid()), userDevToKernel(st.Dev), st.Ino)
	if got != f.Name() {
		t.Errorf("findInProc = %q, want %q", got, f.Name())
	}
}

func TestPathOfFallbacks(t *testing.T) {
	root := kernelDev(254, 0)
	c := newSensor(nil, mountTable{root: {{dev: root, root: "/", mountPoint: "/"}}}, Options{})
	c.fsPaths[probe.FileKey{Dev: root, Ino: 12}] = "/srv/model.bin"
	cases := []struct {
		key  probe.FileKey
		want string
	}{
		{probe.FileKey{Dev: root, Ino: 12}, "/srv/model.bin"},
		{probe.FileKey{Dev: kernelDev(0, 3), Ino: uint64(root)}, "[filesystem metadata of 254:0, mounted on /]"},
		{probe.FileKey{Dev: kernelDev(0, 99), Ino: 5}, "[dev 0:99 ino 5]"},
	}
	for _, tc := range cases {
		if got := c.pathOf(&fileAcc{key: tc.key}); got != tc.want {
			t.Errorf("pathOf(%v) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// pathRecord is a path record as the page-cache probe sends it: the
// header, then the names leaf first, each ending in NUL.
func pathRecord(kind bpfpc.PagecachePathKind, tgid, mntNS uint32, key probe.FileKey, leafFirst ...string) []byte {
	var names []byte
	for _, n := range leafFirst {
		names = append(append(names, n...), 0)
	}
	ev := bpfpc.PagecachePathEvent{Tgid: tgid, Dev: key.Dev, Ino: key.Ino, Gen: key.Gen, Depth: uint32(len(leafFirst)),
		Len: uint32(len(names)), Kind: uint32(kind), MntNs: mntNS}
	head := unsafe.Slice((*byte)(unsafe.Pointer(&ev)), namesAt)
	return append(append([]byte{}, head...), names...)
}

// TestViewRecordNamesTheFileAsItsReaderSawIt: a file first touched by a
// process of another mount namespace comes with the path that process
// used, walked by the probe, before its path inside its filesystem. The
// record names the file by it, with the host's name beside it, though
// the process and its namespace are gone (no process has that pid or
// namespace here) and the namespace's mounts cannot be read; a view the
// probe cut is not taken.
func TestViewRecordNamesTheFileAsItsReaderSawIt(t *testing.T) {
	root := kernelDev(254, 0)
	s := newSensor(nil, mountTable{root: {{dev: root, root: "/", mountPoint: "/"}}}, Options{})
	const gone, foreignNS = 1 << 30, 1
	viewed := probe.FileKey{Dev: root, Ino: 12, Gen: 3}
	cut := probe.FileKey{Dev: root, Ino: 13, Gen: 3}
	s.handle(pathRecord(bpfpc.PagecachePathKindPATH_VIEW, gone, foreignNS, viewed, "model.bin", "the view", "srv"))
	s.handle(pathRecord(bpfpc.PagecachePathKindPATH_SEEN, gone, foreignNS, viewed, "model.bin", "src", "srv"))
	cutView := pathRecord(bpfpc.PagecachePathKindPATH_VIEW, gone, foreignNS, cut, "other.bin", "the view")
	(*bpfpc.PagecachePathEvent)(unsafe.Pointer(&cutView[0])).Truncated = 1
	s.handle(cutView)
	s.handle(pathRecord(bpfpc.PagecachePathKindPATH_SEEN, gone, foreignNS, cut, "other.bin", "src", "srv"))
	for i, k := range []probe.FileKey{viewed, cut} {
		acc := &fileAcc{id: i, key: k, lastP: gone}
		s.files[k] = acc
		s.fileOrder = append(s.fileOrder, acc)
	}
	var r record.Record
	s.fill(&r, 4096)
	if len(r.Files) != 2 {
		t.Fatalf("%d files in the record, want 2", len(r.Files))
	}
	if f := r.Files[0]; f.Path != "/srv/the view/model.bin" || f.HostPath != "/srv/src/model.bin" {
		t.Errorf("the viewed file: path %q, host path %q; want %q and %q", f.Path, f.HostPath, "/srv/the view/model.bin", "/srv/src/model.bin")
	}
	if f := r.Files[1]; f.Path != "/srv/src/other.bin" || f.HostPath != "" {
		t.Errorf("the file whose view was cut: path %q, host path %q; want %q by its host name alone", f.Path, f.HostPath, "/srv/src/other.bin")
	}
}

// A device is bound twice where one mount's root holds another's: the
// files under the inner root have two names. A container runtime's
// single-file binds (distinct, unnested roots) and a mount stacked on its
// like at the same place name each file once.
func TestBoundTwiceWhereOneRootHoldsAnother(t *testing.T) {
	lines := []string{
		"22 1 254:0 / / rw - ext4 /dev/vda rw",
		"30 22 254:0 /srv/data /mnt/data rw - ext4 /dev/vda rw", // a directory bound elsewhere
		"40 22 8:1 /var/lib/docker/containers/c1/hosts /etc/hosts rw - ext4 /dev/sda1 rw",
		"41 22 8:1 /var/lib/docker/containers/c1/hostname /etc/hostname rw - ext4 /dev/sda1 rw",
		"42 22 8:1 /var/lib/docker/volumes/v/_data /models rw - ext4 /dev/sda1 rw",
		"50 22 8:2 / /scratch rw - xfs /dev/sda2 rw",
		"51 50 8:2 / /scratch rw - xfs /dev/sda2 rw", // stacked on its like
		"60 22 8:3 / /a rw - xfs /dev/sda3 rw",
		"61 22 8:3 / /b rw - xfs /dev/sda3 rw", // the whole filesystem twice
	}
	mt := mountTableOf(t, lines)
	got := mt.boundTwice()
	want := []uint32{kernelDev(8, 3), kernelDev(254, 0)} // sorted
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("bound twice: %v, want %v", got, want)
	}
}
