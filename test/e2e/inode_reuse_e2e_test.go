package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
)

// reuseScript writes a (5 pages), reads it, deletes it, then creates b0,
// b1, ... (7 pages each) until one is given a's inode number, reads that
// one and prints its path; exit 3 when none was within 200 files.
const reuseScript = `set -e
d=$1
head -c 20480 /dev/zero | tr '\0' A > "$d/a"
cat "$d/a" > /dev/null
ino=$(stat -c %i "$d/a")
rm "$d/a"
i=0
while [ $i -lt 200 ]; do
	head -c 28672 /dev/zero | tr '\0' B > "$d/b$i"
	if [ "$(stat -c %i "$d/b$i")" = "$ino" ]; then
		cat "$d/b$i" > /dev/null
		echo "$d/b$i"
		exit 0
	fi
	i=$((i+1))
done
exit 3
`

// TestReusedInodeIsANewFile: a file created after another's deletion
// freed its inode number, with that number, is a file of its own in
// files[]: two rows, each under its own name with its own pages, not the
// second merged into the first's row.
func TestReusedInodeIsANewFile(t *testing.T) {
	requireTracing(t)
	dir := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.rec")
	code, stdout, stderr := coldtrace(t, nil, "run", "-q", "-o", rec, "--", "sh", "-c", reuseScript, "sh", dir)
	if code == 3 {
		t.Skipf("the filesystem of %s gave no new file the deleted one's inode number in 200 tries", dir)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b := strings.TrimSpace(stdout)
	a := filepath.Join(dir, "a")
	r := readRecord(t, rec)
	var ra, rb *record.File
	n := 0
	for i, f := range r.Files {
		if f.Path == a || f.Path == b || f.FirstPath == a || f.FirstPath == b {
			n++
			if f.PagesCreated == 5 {
				ra = &r.Files[i]
			} else {
				rb = &r.Files[i]
			}
		}
	}
	if n != 2 || ra == nil || rb == nil {
		t.Fatalf("files %+v, want two rows: %s and %s", r.Files, a, b)
	}
	if ra.Path != a || ra.FirstPath != "" || ra.SizeBytes != 0 {
		t.Errorf("row of 5 pages created %+v, want %s, deleted", *ra, a)
	}
	if rb.Path != b || rb.PagesCreated != 7 || rb.SizeBytes != 28672 || rb.FirstPath != "" {
		t.Errorf("row %+v, want %s with 7 pages created, 28672 bytes", *rb, b)
	}
	if ra.Dev != rb.Dev || ra.Ino != rb.Ino {
		t.Errorf("rows name inodes %d:%d and %d:%d, want one number twice", ra.Dev, ra.Ino, rb.Dev, rb.Ino)
	}
	if ra.Gen == rb.Gen {
		t.Logf("both generations %d: the filesystem keeps none", ra.Gen)
	}
}

// TestFailedBytecodeWriteKeepsTheNextCompile: Python fails to write one
// module's bytecode (its .pyc path is a directory) and deletes the
// temporary file; the next module's temporary file may be given the same
// inode number. Both compiles count, whichever module comes first, and
// the written .pyc is named by its own name.
func TestFailedBytecodeWriteKeepsTheNextCompile(t *testing.T) {
	requireTracing(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	tag, err := exec.Command(python, "-c", "import sys; print(sys.implementation.cache_tag)").Output()
	if err != nil {
		t.Fatalf("python cache tag: %v", err)
	}
	type result struct{ misses, lookups uint64 }
	results := map[string]result{}
	for _, order := range []string{"a, b", "b, a"} {
		pkg := filepath.Join(t.TempDir(), "pkg")
		pyc := filepath.Join(pkg, "__pycache__")
		for _, d := range []string{pyc, filepath.Join(pyc, "a."+strings.TrimSpace(string(tag))+".pyc")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, body := range map[string]string{"a.py": "X = 1\n", "b.py": "Y = 2\n"} {
			if err := os.WriteFile(filepath.Join(pkg, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rec := filepath.Join(t.TempDir(), "run.rec")
		code, _, stderr := coldtrace(t, nil, "run", "-q", "-o", rec, "--", "env", "-u", "PYTHONDONTWRITEBYTECODE",
			python, "-c", fmt.Sprintf("import sys; sys.path.insert(0, %q); import %s", pkg, order))
		if code != 0 {
			t.Fatalf("import %s: exit %d: %s", order, code, stderr)
		}
		r := readRecord(t, rec)
		bpyc := filepath.Join(pyc, "b."+strings.TrimSpace(string(tag))+".pyc")
		st, err := os.Stat(bpyc)
		if err != nil {
			t.Fatalf("import %s: b's bytecode not written: %v", order, err)
		}
		var named, reused bool
		inos := map[uint64]int{}
		for _, f := range r.Files {
			if strings.HasPrefix(f.Path, pyc+"/") {
				inos[f.Ino]++
				reused = reused || inos[f.Ino] > 1
			}
			if f.Path == bpyc {
				named = f.SizeBytes == st.Size() && f.PagesCreated == 1
			}
		}
		if !named {
			t.Errorf("import %s: no row for %s with its %d bytes and 1 page created: %+v", order, bpyc, st.Size(), r.Files)
		}
		t.Logf("import %s: an inode number given to both temporary files: %v", order, reused)
		if r.JIT == nil {
			t.Fatalf("import %s: no JIT section", order)
		}
		for _, c := range r.JIT.Caches {
			if c.Name == "python" {
				results[order] = result{c.Misses, c.Lookups}
			}
		}
	}
	if results["a, b"] != results["b, a"] || results["a, b"].misses != 2 {
		t.Errorf("bytecode cache (misses, lookups) by import order %+v, want 2 misses either way", results)
	}
}

// retryScript downloads $2 into $1/model.incomplete, deletes it (a failed
// attempt), then creates model.incomplete again until it is given the
// deleted file's inode number (the others moved aside), downloads into
// that one and renames it to model.bin; exit 3 when no new file got the
// number within 200.
const retryScript = `set -e
d=$1
curl -sS -o "$d/model.incomplete" "$2"
ino=$(stat -c %i "$d/model.incomplete")
rm "$d/model.incomplete"
i=0
while [ $i -lt 200 ]; do
	: > "$d/model.incomplete"
	if [ "$(stat -c %i "$d/model.incomplete")" = "$ino" ]; then
		curl -sS -o "$d/model.incomplete" "$2"
		mv "$d/model.incomplete" "$d/model.bin"
		exit 0
	fi
	mv "$d/model.incomplete" "$d/aside$i"
	i=$((i+1))
done
exit 3
`

// TestRetriedDownloadIntoAReusedInode: a download whose file is deleted,
// then retried into a new file given the same inode number under the
// same name and renamed into place, is two downloads: the first into a
// file gone, the second into model.bin, each with its own bytes and its
// own files[] row (told apart by the generation), not one merged file
// named after the survivor.
func TestRetriedDownloadIntoAReusedInode(t *testing.T) {
	requireTracing(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	srv := hubServer(t)
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "run.rec")
	code, _, stderr := coldtrace(t, nil, "run", "-q", "-o", out, "--", "sh", "-c", retryScript, "sh", dir, srv.URL+"/model")
	if code == 3 {
		t.Skipf("the filesystem of %s gave no new file the deleted one's inode number in 200 tries", dir)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rec := readRecord(t, out)
	if err := invariants.Err(rec); err != nil {
		t.Error(err)
	}
	if len(rec.Downloads) != 2 {
		t.Fatalf("downloads %+v, want two", rec.Downloads)
	}
	first, second := rec.Downloads[0], rec.Downloads[1]
	if len(first.Files) == 0 || len(second.Files) == 0 {
		t.Fatalf("downloads without files: %+v", rec.Downloads)
	}
	a, b := first.Files[0], second.Files[0]
	if a.Dev != b.Dev || a.Ino != b.Ino {
		t.Fatalf("files %d:%d and %d:%d, want one inode number twice", a.Dev, a.Ino, b.Dev, b.Ino)
	}
	gens := map[uint32]bool{}
	for _, f := range rec.Files {
		if f.Dev == a.Dev && f.Ino == a.Ino {
			gens[f.Gen] = true
		}
	}
	if len(gens) < 2 {
		t.Skipf("files[] tells no two generations of inode %d apart (%v): the filesystem of %s keeps none", a.Ino, gens, dir)
	}
	if a.Gen == b.Gen {
		t.Errorf("both downloads went to generation %d of inode %d", a.Gen, a.Ino)
	}
	incomplete, final := filepath.Join(dir, "model.incomplete"), filepath.Join(dir, "model.bin")
	for _, c := range []struct {
		d         record.Download
		path      string
		gone      bool
		firstName string
	}{{first, incomplete, true, ""}, {second, final, false, incomplete}} {
		f := c.d.Files[0]
		if c.d.Destination != record.DestFile || c.d.Path != c.path || f.Gone != c.gone || f.WrittenPath != c.firstName ||
			f.BytesWritten != hubBody {
			t.Errorf("download %+v, want %d bytes into %s (gone %v, first named %q)", c.d, hubBody, c.path, c.gone, c.firstName)
		}
	}
}
