package procmaps

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseKeepsFileMappingsWithTheirWholePath(t *testing.T) {
	in := strings.Join([]string{
		"7f0000000000-7f0000001000 r-xp 00002000 fd:01 1234                       /usr/lib/libc.so.6",
		"7f0000001000-7f0000002000 rw-p 00000000 00:00 0 ",
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]",
		"7f0000003000-7f0000004000 r--p 00000000 103:02 99                        /home/u/my lib/libx.so (deleted)",
		"garbage line",
		"7f0000005000-7f0000004000 r--p 00000000 fd:01 5 /backwards",
	}, "\n")
	got, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d mappings, want 2: %+v", len(got), got)
	}
	want0 := Mapping{Start: 0x7f0000000000, End: 0x7f0000001000, Perms: "r-xp", Offset: 0x2000, Major: 0xfd, Minor: 1, Inode: 1234, Path: "/usr/lib/libc.so.6"}
	if got[0] != want0 {
		t.Errorf("first: %+v, want %+v", got[0], want0)
	}
	if got[1].Path != "/home/u/my lib/libx.so (deleted)" || got[1].Major != 0x103 || got[1].Minor != 2 || got[1].Inode != 99 {
		t.Errorf("second: %+v", got[1])
	}
	if !got[0].Exec() || got[1].Exec() {
		t.Errorf("exec: %v %v", got[0].Exec(), got[1].Exec())
	}
}

func TestReadFindsOwnExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(exe, &st); err != nil {
		t.Fatal(err)
	}
	ms, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Same(st.Dev, st.Ino) {
			return
		}
	}
	t.Fatalf("no mapping of %s (dev %d ino %d) among %d", exe, st.Dev, st.Ino, len(ms))
}

// mapFile maps p into this process and returns its mapping.
func mapFile(t *testing.T, p string) Mapping {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	ms, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Same(st.Dev, st.Ino) {
			return m
		}
	}
	t.Fatalf("%s not in maps", p)
	return Mapping{}
}

// TestOpenGivesTheMappedInodeAfterItsPathIsSwapped: the path now names a
// symlink to another file; Open still reads the file that was mapped.
func TestOpenGivesTheMappedInodeAfterItsPathIsSwapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("map_files needs root")
	}
	dir := t.TempDir()
	lib, other := filepath.Join(dir, "lib.so"), filepath.Join(dir, "other.so")
	if err := os.WriteFile(lib, []byte(strings.Repeat("M", 4096)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(strings.Repeat("O", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	m := mapFile(t, lib)
	if err := os.Rename(lib, lib+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, lib); err != nil {
		t.Fatal(err)
	}
	f, err := Open(os.Getpid(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 8)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if string(b) != "MMMMMMMM" {
		t.Fatalf("read %q through map_files, want the mapped file's bytes", b)
	}
}

func TestOpenRefusesAMappingWhoseInodeDiffers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("map_files needs root")
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mapFile(t, p)
	m.Inode++
	if f, err := Open(os.Getpid(), m); !errors.Is(err, ErrNotSameFile) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("Open with a wrong inode: %v, want ErrNotSameFile", err)
	}
}

func TestFilesPathIsMapFilesName(t *testing.T) {
	got := FilesPath(42, Mapping{Start: 0x7f00ab000, End: 0x7f00ac000})
	if got != "/proc/42/map_files/7f00ab000-7f00ac000" {
		t.Fatal(got)
	}
}
