package pagecache_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
)

// fileReader is one way a program reads a whole file: command reads
// the file at path.
type fileReader struct {
	what    string
	command func(path string) []string
}

// fileReaders read a file by read(2) (cat) and by faults on a mapping of
// it (python3, which maps it and touches a byte of each page, the
// descriptor closed first); the test skips without python3.
func fileReaders(t *testing.T) []fileReader {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: it maps the file")
	}
	return []fileReader{
		{"read(2)", func(path string) []string { return []string{"cat", path} }},
		{"mmap faults", func(path string) []string {
			return []string{py, "-c", "import mmap, sys\nf = open(sys.argv[1], 'rb')\n" +
				"m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\nf.close()\n" +
				"s = sum(m[i] for i in range(0, len(m), 4096))\n", path}
		}},
	}
}

// A file with several names (hard links: uv and conda install packages
// by linking them from their caches, perf's build-id cache links every
// binary it records) is named by the link the program read or mapped it
// through, not by whichever of its names the kernel cached last: here a
// cache-side link made after the program's own, so that the kernel lists
// it first. Read by read(2) and by mmap faults; each file's pages exact.
func TestHardLinkedFileNamedByTheLinkItWasReadThrough(t *testing.T) {
	testenv.RequireTracing(t)
	readers := fileReaders(t)
	base := e2eutil.DiskDir(t)
	hex := "5b78c2005506226a3e400e37ee93ef0d1ecf4576"
	for i, r := range readers {
		own := filepath.Join(base, "venv", "lib", "python3.11", "site-packages", "torch", "lib", string(rune('a'+i))+"libtorch_cpu.so")
		writeNameFile(t, own)
		alias := filepath.Join(base, "cache", "archive-v0", hex, string(rune('a'+i))+"libtorch_cpu.so")
		if err := os.MkdirAll(filepath.Dir(alias), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(own, alias); err != nil {
			t.Skipf("this filesystem makes no hard links: %v", err)
		}
		// Both names looked up: both in the kernel's cache of names.
		if _, err := os.Stat(alias); err != nil {
			t.Fatal(err)
		}
		evictPath(t, own)
		rec := traceRun(t, r.command(own))
		f, ok := recordFileByIno(rec, inoOf(t, own))
		if !ok {
			t.Errorf("%s: no entry for the file in the record", r.what)
			continue
		}
		if f.Path != own {
			t.Errorf("%s: named %q, want the link it was read through, %q", r.what, f.Path, own)
		}
		if f.PagesMissed-f.PagesReread != nameFilePages {
			t.Errorf("%s: pages missed %d (re-read %d), want %d", r.what, f.PagesMissed, f.PagesReread, nameFilePages)
		}
	}
}

// A directory bind-mounted elsewhere on its own filesystem, in
// coldtrace's own mount namespace (moving a model cache to a larger disk
// this way is common), gives each file under it two names: each file is
// named by the one its reader used, the other in host_path, read by
// read(2) and by mmap faults, through either name.
func TestBindMountedFileNamedAsItsReaderSawIt(t *testing.T) {
	testenv.RequireTracing(t)
	readers := fileReaders(t)
	base := e2eutil.DiskDir(t)
	src := filepath.Join(base, "disk", "hf-cache")
	mnt := filepath.Join(base, "home", ".cache", "huggingface")
	for _, d := range []string{src, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(src, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	for i, r := range readers {
		for _, through := range []string{"the bind mount", "its own directory"} {
			// A Hugging Face blob's shape: a 64-hex name under blobs/.
			name := filepath.Join("hub", "models--org--model", "blobs",
				fmt.Sprintf("%c%d%s", 'a'+i, len(through), strings.Repeat("9f86d081", 8)[3:])) // 64 bytes
			own, other := filepath.Join(mnt, name), filepath.Join(src, name)
			if through == "its own directory" {
				own, other = other, own
			}
			writeNameFile(t, own)
			evictPath(t, own)
			rec := traceRun(t, r.command(own))
			f, ok := recordFileByIno(rec, inoOf(t, own))
			if !ok {
				t.Errorf("%s through %s: no entry for the file in the record", r.what, through)
				continue
			}
			if f.Path != own || (f.HostPath != "" && f.HostPath != other) {
				t.Errorf("%s through %s: named %q (host_path %q), want %q (host_path %q or none)",
					r.what, through, f.Path, f.HostPath, own, other)
			}
			if f.PagesMissed-f.PagesReread != nameFilePages {
				t.Errorf("%s through %s: pages missed %d (re-read %d), want %d", r.what, through, f.PagesMissed, f.PagesReread, nameFilePages)
			}
		}
	}
}
