package uprobes

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// testGate is the shape of the name-lookup gate: getaddrinfo and the
// function of libc that calls it, glibc's own libraries quiet.
func testGate() *Gate {
	return &Gate{Symbols: []string{"getaddrinfo", "getaddrinfo_a"}, Quiet: []string{"libc", "libm", "ld-linux-x86-64"}}
}

// buildELF compiles src into out with the C compiler and extra flags.
func buildELF(t *testing.T, dir, name, src string, flags ...string) string {
	t.Helper()
	c := filepath.Join(dir, name+".c")
	out := filepath.Join(dir, name)
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-O1", "-o", out, c}, flags...)
	if b, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc %v: %v\n%s", args, err, b)
	}
	return out
}

func mayCallFile(t *testing.T, g *Gate, p string, program bool) bool {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return g.mayCall(f, program)
}

// TestGateTellsProgramsThatCanCallTheFunction: a program importing the
// function, one importing the libc function that calls it, and one
// needing a library outside the quiet ones can call it; one needing
// only libc cannot, nor can a library that does not import it; a script
// or a file that is no ELF is taken to call it.
func TestGateTellsProgramsThatCanCallTheFunction(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc)")
	}
	dir := t.TempDir()
	g := testGate()
	quiet := buildELF(t, dir, "quiet", "#include <unistd.h>\nint main(void) { return getpid() < 0; }\n")
	lookup := buildELF(t, dir, "lookup", `#include <netdb.h>
int main(int argc, char **argv) { struct addrinfo *r; return getaddrinfo(argv[0], 0, 0, &r); }
`)
	async := buildELF(t, dir, "async", `#define _GNU_SOURCE
#include <netdb.h>
int main(void) { return getaddrinfo_a(GAI_NOWAIT, 0, 0, 0); }
`)
	lib := buildELF(t, dir, "libnet.so", `#include <netdb.h>
int net_lookup(const char *n) { struct addrinfo *r; return getaddrinfo(n, 0, 0, &r); }
`, "-shared", "-fPIC")
	plainLib := buildELF(t, dir, "libplain.so", "int plain_add(int a) { return a + 1; }\n", "-shared", "-fPIC")
	needsNet := buildELF(t, dir, "needsnet", "int net_lookup(const char *);\nint main(int c, char **v) { return net_lookup(v[0]); }\n",
		"-L"+dir, "-lnet", "-Wl,-rpath,"+dir)
	needsPlain := buildELF(t, dir, "needsplain", "int plain_add(int);\nint main(int c, char **v) { return plain_add(c); }\n",
		"-L"+dir, "-lplain", "-Wl,-rpath,"+dir)
	script := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec curl \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken")
	if err := os.WriteFile(broken, []byte("\x7fELF\x02\x01\x01 not an ELF header at all"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		path    string
		program bool
		want    bool
	}{
		{"a program needing only libc", quiet, true, false},
		{"a program importing getaddrinfo", lookup, true, true},
		{"a program importing getaddrinfo_a", async, true, true},
		{"a program needing a library that is not quiet", needsNet, true, true},
		{"a program needing a library that is not quiet, though it never looks a name up", needsPlain, true, true},
		{"a mapped library importing getaddrinfo", lib, false, true},
		{"a mapped library that does not", plainLib, false, false},
		{"a mapped program needing an unquiet library, by its own imports", needsNet, false, false},
		{"a script", script, true, true},
		{"a broken ELF", broken, true, true},
	}
	for _, c := range cases {
		if got := mayCallFile(t, g, c.path, c.program); got != c.want {
			t.Errorf("%s: may call %v, want %v", c.name, got, c.want)
		}
	}
}

func TestGateQuietLibraryNames(t *testing.T) {
	g := &Gate{Quiet: []string{"libc", "libstdc++", "ld-linux-x86-64"}}
	cases := []struct {
		needed string
		want   bool
	}{
		{"libc.so.6", true},
		{"libc.so", true},
		{"libcurl.so.4", false},
		{"libcrypto.so.3", false},
		{"libstdc++.so.6", true},
		{"ld-linux-x86-64.so.2", true},
		{"libc.so.6.d/../libcurl.so.4", false}, // a path, which the loader opens as it is
	}
	for _, c := range cases {
		if got := g.quiet(c.needed); got != c.want {
			t.Errorf("%q quiet: %v, want %v", c.needed, got, c.want)
		}
	}
}

// stuckFile is a program whose reads wait until release is closed, as a
// file on a hung file system would.
type stuckFile struct {
	release chan struct{}
	closed  chan struct{}
}

func (f *stuckFile) ReadAt(p []byte, off int64) (int, error) {
	<-f.release
	return 0, io.ErrUnexpectedEOF
}

func (f *stuckFile) Close() error {
	close(f.closed)
	return nil
}

// TestProgramsOnAHungFileSystemCountAsCallers: reading the programs a
// command will run stops waiting after its timeout and answers that they
// may call the function (probed, as without a gate); the file is closed
// once its read returns.
func TestProgramsOnAHungFileSystemCountAsCallers(t *testing.T) {
	g := testGate()
	f := &stuckFile{release: make(chan struct{}), closed: make(chan struct{})}
	start := time.Now()
	got := readPrograms([]*Gate{g}, []*stuckFile{f}, 50*time.Millisecond)
	if took := time.Since(start); !got[g] || took > 5*time.Second {
		t.Errorf("a hung program: answer %v after %v, want yes after the timeout", got[g], took)
	}
	close(f.release)
	select {
	case <-f.closed:
	case <-time.After(10 * time.Second):
		t.Error("the hung program was never closed")
	}
	if got := readPrograms([]*Gate{g}, []*os.File(nil), time.Second); !got[g] {
		t.Error("no programs read: the gate must answer yes")
	}
}
