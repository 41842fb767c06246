package outfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// These tests act as whoever runs them; outfile_root_test.go acts for a
// user under sudo.

func self(t *testing.T) actor.Actor {
	t.Helper()
	a, err := actor.Self()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func text(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

func TestWriteNewFileUsesTheUmask(t *testing.T) {
	a := self(t)
	for _, umask := range []uint32{0o022, 0o027, 0o077, 0o002} {
		a.Umask = umask
		p := filepath.Join(t.TempDir(), "out.json")
		if err := Write(a, p, text("{}")); err != nil {
			t.Fatal(err)
		}
		if got, want := mode(t, p), 0o666&^umask; got != want {
			t.Errorf("umask %#o: new file mode %#o, want %#o", umask, got, want)
		}
		if b, _ := os.ReadFile(p); string(b) != "{}" {
			t.Errorf("content %q", b)
		}
	}
}

func TestWriteKeepsTheModeOfAReplacedFile(t *testing.T) {
	a := self(t)
	dir := t.TempDir()
	for _, perm := range []uint32{0o600, 0o640, 0o664, 0o444} {
		p := filepath.Join(dir, "keep")
		os.Remove(p)
		must(t, os.WriteFile(p, []byte("old"), 0o600))
		must(t, os.Chmod(p, os.FileMode(perm)))
		err := Write(a, p, text("new"))
		if perm == 0o444 && os.Geteuid() != 0 {
			if err == nil {
				t.Errorf("a read-only file was replaced")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := mode(t, p); got != perm {
			t.Errorf("replaced %#o file has mode %#o", perm, got)
		}
		if b, _ := os.ReadFile(p); string(b) != "new" {
			t.Errorf("content %q", b)
		}
	}
	assertNoTemp(t, dir)
}

func TestWriteRefusesWhatIsNotARegularFile(t *testing.T) {
	a := self(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	must(t, unix.Mkfifo(fifo, 0o644))
	target := filepath.Join(dir, "target")
	must(t, os.WriteFile(target, []byte("keep"), 0o644))
	link := filepath.Join(dir, "link")
	must(t, os.Symlink(target, link))
	sub := filepath.Join(dir, "sub")
	must(t, os.Mkdir(sub, 0o755))
	sock := filepath.Join(dir, "sock")
	ln, err := unixListen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	cases := map[string]string{
		"/dev/null":   "character device",
		"/dev/stdout": "symbolic link",
		fifo:          "FIFO",
		link:          "symbolic link",
		sub:           "directory",
		sock:          "socket",
	}
	for p, kind := range cases {
		before := lstat(t, p)
		done := make(chan error, 1)
		go func() { done <- Write(a, p, text("clobbered")) }()
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Write(%s) blocks", p)
		}
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.Kind != kind {
			t.Errorf("Write(%s): err %v; want a refusal naming a %s", p, err, kind)
		}
		if msg := err.Error(); !strings.Contains(msg, "use - for stdout") || strings.Contains(msg, "\n") {
			t.Errorf("Write(%s): message %q is not one line suggesting -", p, msg)
		}
		if err := Check(a, Output{Flag: "--json", Path: p}); !errors.As(err, &nr) || !strings.HasPrefix(err.Error(), "--json: "+p+" is a "+kind) {
			t.Errorf("Check(%s): %v", p, err)
		}
		after := lstat(t, p)
		if before.Ino != after.Ino || before.Mode != after.Mode || before.Rdev != after.Rdev {
			t.Errorf("%s changed: %+v -> %+v", p, before, after)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the symlink's target now holds %q", b)
	}
	assertNoTemp(t, dir)
}

func TestWriteFailureKeepsTheOldFile(t *testing.T) {
	a := self(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "rec")
	must(t, os.WriteFile(p, []byte("old"), 0o644))
	boom := errors.New("render failed")
	err := Write(a, p, func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("old file now holds %q", b)
	}
	if err := Write(a, filepath.Join(dir, "new"), func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	assertNoTemp(t, dir)
}

func TestCheck(t *testing.T) {
	a := self(t)
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	must(t, os.WriteFile(existing, nil, 0o644))
	hard := filepath.Join(dir, "hardlink")
	must(t, os.Link(existing, hard))
	real := filepath.Join(dir, "real")
	must(t, os.Mkdir(real, 0o755))
	alias := filepath.Join(dir, "alias")
	must(t, os.Symlink(real, alias))
	t.Chdir(dir)

	ok := [][]Output{
		{{"--json", "-"}, {"-o", "rec"}, {"--pprof", existing}},
		{{"-o", filepath.Join(real, "a")}, {"--json", filepath.Join(real, "b")}},
		{},
	}
	for _, outs := range ok {
		if err := Check(a, outs...); err != nil {
			t.Errorf("Check(%v): %v", outs, err)
		}
	}
	bad := map[string]struct {
		outs []Output
		want string
	}{
		"empty path":      {[]Output{{"--json", ""}}, "--json: empty path"},
		"twice the same":  {[]Output{{"--json", "x"}, {"-o", "x"}}, "--json x and -o x are the same file"},
		"relative, abs":   {[]Output{{"--json", "x"}, {"-o", filepath.Join(dir, "x")}}, "are the same file"},
		"dot dot":         {[]Output{{"--json", "real/../x"}, {"-o", "x"}}, "are the same file"},
		"via a dir link":  {[]Output{{"--json", "real/new"}, {"-o", "alias/new"}}, "are the same file"},
		"existing, link":  {[]Output{{"--json", "real/../existing"}, {"-o", hard}}, "are the same file"},
		"stdout twice":    {[]Output{{"--json", "-"}, {"-o", "-"}}, "--json and -o both write to stdout"},
		"missing dir":     {[]Output{{"-o", "nowhere/rec"}}, "no such file or directory"},
		"dir is a file":   {[]Output{{"-o", "existing/rec"}}, "not a directory"},
		"path is the dir": {[]Output{{"-o", "real/"}}, "directory"},
	}
	for name, c := range bad {
		err := Check(a, c.outs...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Check = %v; want one line with %q", name, err, c.want)
		}
	}
	assertNoTemp(t, dir)
	assertNoTemp(t, real)
}

func mode(t *testing.T, p string) uint32 {
	t.Helper()
	return lstat(t, p).Mode & 0o7777
}

func lstat(t *testing.T, p string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// assertNoTemp fails when a temporary file is left in dir.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

func unixListen(path string) (io.Closer, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestZeroActorWritesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out")
	if err := Write(actor.Actor{}, p, text("x")); !errors.Is(err, actor.ErrUnresolved) {
		t.Errorf("Write with no actor: %v", err)
	}
	if err := Check(actor.Actor{}, Output{Flag: "-o", Path: p}); !errors.Is(err, actor.ErrUnresolved) {
		t.Errorf("Check with no actor: %v", err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s written: %v", p, err)
	}
}
