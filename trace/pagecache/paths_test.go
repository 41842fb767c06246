package pagecache

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coldtrace/coldtrace/trace/probe"
)

func TestParseMountInfo(t *testing.T) {
	lines := []string{
		"22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw",
		"30 22 254:0 /srv/data /mnt/data rw - ext4 /dev/vda rw",
		"31 22 0:5 / /dev rw shared:2 - devtmpfs udev rw",
		`32 22 8:1 / /mnt/with\040space rw - xfs /dev/sda1 rw`,
	}
	mt := mountTable{}
	for _, l := range lines {
		m, ok := parseMountInfoLine(l)
		if !ok {
			t.Fatalf("not parsed: %s", l)
		}
		mt[m.dev] = append(mt[m.dev], m)
	}
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
