package fstype

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestName(t *testing.T) {
	for magic, want := range map[int64]string{unix.TMPFS_MAGIC: "tmpfs", unix.OVERLAYFS_SUPER_MAGIC: "overlay",
		unix.EXT4_SUPER_MAGIC: "ext4", zfsMagic: "zfs", 0x1234: "0x1234"} {
		if got := Name(magic); got != want {
			t.Errorf("Name(%#x) = %q, want %q", magic, got, want)
		}
	}
	if !ContainerLayer(unix.OVERLAYFS_SUPER_MAGIC) || ContainerLayer(unix.TMPFS_MAGIC) || ContainerLayer(unix.EXT4_SUPER_MAGIC) {
		t.Error("ContainerLayer: overlay must be, tmpfs and ext4 must not")
	}
	if !Volatile(unix.RAMFS_MAGIC) || Volatile(unix.EXT4_SUPER_MAGIC) {
		t.Error("Volatile: ramfs must be, ext4 must not")
	}
}

func TestOfMissingPathIsItsAncestors(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	magic, missing, err := Of(dir)
	if err != nil || missing || magic != int64(st.Type) {
		t.Fatalf("Of(%s) = %#x %v %v, want %#x", dir, magic, missing, err, st.Type)
	}
	magic, missing, err = Of(filepath.Join(dir, "not", "yet"))
	if err != nil || !missing || magic != int64(st.Type) {
		t.Errorf("Of(missing) = %#x %v %v, want %#x, missing", magic, missing, err, st.Type)
	}
	if _, err := os.Stat(filepath.Join(dir, "not")); err == nil {
		t.Error("Of created the path")
	}
}
