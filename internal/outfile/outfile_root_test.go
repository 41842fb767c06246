package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/internal/testuser"
)

// underSudo is coldtrace as `sudo coldtrace` by a user the test creates:
// root, with SUDO_UID, SUDO_GID and SUDO_USER as sudo sets them.
func underSudo(t *testing.T) (actor.Actor, testuser.User) {
	t.Helper()
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	a, err := actor.Resolve("", u.SudoEnv(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}
	if a.UID != uint32(u.UID) || a.Via != "sudo" {
		t.Fatalf("acts for uid %d via %q; want %d via sudo", a.UID, a.Via, u.UID)
	}
	return a, u
}

// userDir is a directory the user owns, under parents they may search.
func userDir(t *testing.T, u testuser.User) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.Chmod(filepath.Dir(dir), 0o711))
	must(t, os.Chown(dir, u.UID, u.GID))
	return dir
}

func TestSudoCannotWriteWhereTheUserCannot(t *testing.T) {
	a, u := underSudo(t)
	etc := "/etc/coldtrace-test-" + u.Name
	err := Check(a, Output{Flag: "--json", Path: etc})
	if !errors.Is(err, unix.EACCES) || !strings.Contains(err.Error(), "as "+u.Name+", who ran sudo") {
		t.Errorf("Check(%s) = %v; want permission denied as %s", etc, err, u.Name)
	}
	if err := Write(a, etc, text("x")); !errors.Is(err, unix.EACCES) {
		t.Errorf("Write(%s) = %v; want permission denied", etc, err)
	}
	if _, err := os.Lstat(etc); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists: %v", etc, err)
	}

	// /root and any 0700 directory of root's stay closed.
	private := t.TempDir()
	must(t, os.Chmod(filepath.Dir(private), 0o711))
	must(t, os.Chmod(private, 0o700))
	for _, p := range []string{"/root/coldtrace-test.json", filepath.Join(private, "out.json")} {
		if p == "/root/coldtrace-test.json" {
			if fi, err := os.Stat("/root"); err != nil || fi.Mode().Perm()&0o003 != 0 {
				continue // /root is open on this machine
			}
		}
		if err := Check(a, Output{Flag: "-o", Path: p}); !errors.Is(err, unix.EACCES) {
			t.Errorf("Check(%s) = %v; want permission denied", p, err)
		}
		if err := Write(a, p, text("x")); !errors.Is(err, unix.EACCES) {
			t.Errorf("Write(%s) = %v; want permission denied", p, err)
		}
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists: %v", p, err)
		}
	}

	// A root file in the user's own directory: the user could delete it,
	// but an output they may not write is not replaced.
	dir := userDir(t, u)
	rootFile := filepath.Join(dir, "root.json")
	must(t, os.WriteFile(rootFile, []byte("root's"), 0o644))
	if err := Check(a, Output{Flag: "--json", Path: rootFile}); !errors.Is(err, unix.EACCES) {
		t.Errorf("Check(root's 0644 file) = %v; want permission denied", err)
	}
	if err := Write(a, rootFile, text("x")); !errors.Is(err, unix.EACCES) {
		t.Errorf("Write(root's 0644 file) = %v; want permission denied", err)
	}
	if b, _ := os.ReadFile(rootFile); string(b) != "root's" {
		t.Errorf("root's file now holds %q", b)
	}
}

func TestSudoNewFileBelongsToTheUser(t *testing.T) {
	a, u := underSudo(t)
	a.Umask = 0o027
	dir := userDir(t, u)
	p := filepath.Join(dir, "out.json")
	if err := Check(a, Output{Flag: "--json", Path: p}); err != nil {
		t.Fatal(err)
	}
	if err := Write(a, p, text("{}")); err != nil {
		t.Fatal(err)
	}
	st := lstat(t, p)
	if int(st.Uid) != u.UID || int(st.Gid) != u.GID || st.Mode&0o7777 != 0o640 {
		t.Errorf("new file %d:%d %#o; want %d:%d 0640", st.Uid, st.Gid, st.Mode&0o7777, u.UID, u.GID)
	}
	assertNoTemp(t, dir)
}

func TestSudoReplacedFileKeepsModeAndOwner(t *testing.T) {
	a, u := underSudo(t)
	dir := userDir(t, u)
	p := filepath.Join(dir, "private.json")
	must(t, os.WriteFile(p, []byte("old"), 0o600))
	must(t, os.Chown(p, u.UID, u.GroupGID))
	if err := Check(a, Output{Flag: "--json", Path: p}); err != nil {
		t.Fatal(err)
	}
	before := lstat(t, p)
	if err := Write(a, p, text("new")); err != nil {
		t.Fatal(err)
	}
	st := lstat(t, p)
	if int(st.Uid) != u.UID || int(st.Gid) != u.GroupGID || st.Mode&0o7777 != 0o600 {
		t.Errorf("replaced file %d:%d %#o; want %d:%d 0600", st.Uid, st.Gid, st.Mode&0o7777, u.UID, u.GroupGID)
	}
	if st.Ino == before.Ino {
		t.Errorf("file written in place; want an atomic replacement in the user's own directory")
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("content %q", b)
	}
	assertNoTemp(t, dir)
}

// TestSudoWritesInPlaceWhereItCannotReplace covers files the user may
// write but not replace with one of their own: in a directory they may
// not write, or owned by someone else. Shell redirection writes those in
// place, keeping owner and mode, and so does coldtrace.
func TestSudoWritesInPlaceWhereItCannotReplace(t *testing.T) {
	a, u := underSudo(t)
	rootDir := t.TempDir()
	must(t, os.Chmod(filepath.Dir(rootDir), 0o711))
	must(t, os.Chmod(rootDir, 0o755))
	theirs := filepath.Join(rootDir, "theirs.json")
	must(t, os.WriteFile(theirs, []byte("old content, longer"), 0o640))
	must(t, os.Chown(theirs, u.UID, u.GID))

	shared := userDir(t, u)
	rootOwned := filepath.Join(shared, "shared.json")
	must(t, os.WriteFile(rootOwned, []byte("old content, longer"), 0o600))
	must(t, os.Chmod(rootOwned, 0o666))

	for p, owner := range map[string]int{theirs: u.UID, rootOwned: 0} {
		before := lstat(t, p)
		if err := Check(a, Output{Path: p}); err != nil {
			t.Fatal(err)
		}
		if err := Write(a, p, text("new")); err != nil {
			t.Fatal(err)
		}
		st := lstat(t, p)
		if st.Ino != before.Ino || int(st.Uid) != owner || st.Mode != before.Mode {
			t.Errorf("%s: inode %d->%d, owner %d (want %d), mode %#o->%#o", p, before.Ino, st.Ino, st.Uid, owner, before.Mode, st.Mode)
		}
		if b, _ := os.ReadFile(p); string(b) != "new" {
			t.Errorf("%s holds %q", p, b)
		}
	}
	assertNoTemp(t, rootDir)
	assertNoTemp(t, shared)
}

// TestRootLoginKeepsTheOwner: a real root login replacing a user's file
// leaves it theirs.
func TestRootLoginKeepsTheOwner(t *testing.T) {
	testenv.RequireRoot(t)
	u := testuser.Create(t)
	a, err := actor.Resolve("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	dir := userDir(t, u)
	p := filepath.Join(dir, "theirs.json")
	must(t, os.WriteFile(p, []byte("old"), 0o604))
	must(t, os.Chown(p, u.UID, u.GroupGID))
	if err := Write(a, p, text("new")); err != nil {
		t.Fatal(err)
	}
	st := lstat(t, p)
	if int(st.Uid) != u.UID || int(st.Gid) != u.GroupGID || st.Mode&0o7777 != 0o604 {
		t.Errorf("file %d:%d %#o after root replaced it; want %d:%d 0604", st.Uid, st.Gid, st.Mode&0o7777, u.UID, u.GroupGID)
	}
}

// TestSudoRefusalsLeaveSpecialFilesAlone repeats the refusals of
// non-regular outputs with the user's rights: /dev/null, a FIFO (also one
// with exec bits) and a symlink to a file of root's.
func TestSudoRefusalsLeaveSpecialFilesAlone(t *testing.T) {
	a, u := underSudo(t)
	dir := userDir(t, u)
	fifo := filepath.Join(dir, "f")
	must(t, unix.Mkfifo(fifo, 0o755))
	must(t, os.Chown(fifo, u.UID, u.GID))
	// A link to a file of root's (not /etc/passwd: tests of other
	// packages add users at the same time).
	rootsDir := t.TempDir()
	rootsFile := filepath.Join(rootsDir, "config")
	must(t, os.WriteFile(rootsFile, []byte("root's"), 0o644))
	link := filepath.Join(dir, "config")
	must(t, os.Symlink(rootsFile, link))
	for _, p := range []string{"/dev/null", "/dev/stdout", fifo, link} {
		before := lstat(t, p)
		if err := Check(a, Output{Flag: "-o", Path: p}); err == nil || !strings.Contains(err.Error(), "use - for stdout") {
			t.Errorf("Check(%s) = %v", p, err)
		}
		if err := Write(a, p, text("x")); err == nil {
			t.Errorf("Write(%s) succeeded", p)
		}
		if after := lstat(t, p); after.Ino != before.Ino || after.Mode != before.Mode {
			t.Errorf("%s changed", p)
		}
	}
	if b, _ := os.ReadFile(rootsFile); string(b) != "root's" {
		t.Errorf("the link's target now holds %q", b)
	}
}
