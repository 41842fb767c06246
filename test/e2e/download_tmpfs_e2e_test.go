package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution/invariants"
	"github.com/coldtrace/coldtrace/record"
)

// TestTmpfsDownloadIsInFiles: a loopback download written to tmpfs (no
// page-cache event sees its pages) is in downloads[] and in files[] under
// the same byte-exact name, with its exact size and the pages it created,
// and nothing read from disk: into /dev/shm under a temporary name
// renamed into place (a name that is not UTF-8), and into a tmpfs the
// test mounts under a 200-byte name.
func TestTmpfsDownloadIsInFiles(t *testing.T) {
	requireTracing(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	srv := hubServer(t)
	shm, err := os.MkdirTemp("/dev/shm", "coldtrace-dl-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	if fs := fsType(t, shm); fs != unix.TMPFS_MAGIC {
		t.Skipf("/dev/shm is not tmpfs (f_type %#x)", fs)
	}
	mnt := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128m", "coldtrace-test", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	for _, tc := range []struct {
		name, dest, written string
	}{
		{"dev-shm renamed", filepath.Join(shm, "model\xff\xfe.bin"), filepath.Join(shm, "model\xff\xfe.bin.part")},
		{"mounted tmpfs", filepath.Join(mnt, strings.Repeat("m", 196)+".bin"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := `curl -sS -o "$1" "$2"`
			written := tc.dest
			if tc.written != "" {
				script, written = `curl -sS -o "$3" "$2" && mv "$3" "$1"`, tc.written
			}
			out := filepath.Join(t.TempDir(), "run.rec")
			code, _, stderr := coldtrace(t, nil, "-q", "-o", out, "--", "/bin/sh", "-c", script, "sh", tc.dest, srv.URL+"/model", tc.written)
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			rec := readRecord(t, out)
			if err := invariants.Err(rec); err != nil {
				t.Error(err)
			}
			checkTmpfsDownload(t, rec, tc.dest, written)
		})
	}
}

// checkTmpfsDownload holds rec to one download of hubBody bytes into
// dest (written under written), and a files[] row of the same file.
func checkTmpfsDownload(t *testing.T, rec *record.Record, dest, written string) {
	t.Helper()
	if len(rec.Downloads) != 1 {
		t.Fatalf("downloads %+v, want one", rec.Downloads)
	}
	d := rec.Downloads[0]
	// The received bytes hold the response's headers too.
	if d.Bytes < hubBody || d.Bytes > hubBody+4096 || d.Path != dest || d.Destination != record.DestFile || len(d.Files) == 0 {
		t.Fatalf("download of %d bytes into %q (%s; candidates %+v; received %+v), want the %d of the body and its headers into %q",
			d.Bytes, d.Path, d.Destination, d.Candidates, d.Samples, hubBody, dest)
	}
	var st unix.Stat_t
	if err := unix.Stat(dest, &st); err != nil {
		t.Fatal(err)
	}
	var row *record.File
	for i := range rec.Files {
		if f := &rec.Files[i]; f.Ino == st.Ino && f.Dev == d.Files[0].Dev {
			row = f
		}
	}
	if row == nil {
		t.Fatalf("files[] has no row for %q (inode %d): %d rows", dest, st.Ino, len(rec.Files))
	}
	ps := uint64(max(rec.Host.PageSize, 4096))
	if row.Path != dest || row.SizeBytes != hubBody || row.PagesCreated*ps != hubBody || row.FS != "tmpfs" {
		t.Errorf("row %q: size %d, created %d pages, fs %q; want %q, %d bytes created, tmpfs",
			row.Path, row.SizeBytes, row.PagesCreated, row.FS, dest, hubBody)
	}
	if first := map[bool]string{true: written}[written != dest]; row.FirstPath != first {
		t.Errorf("row's first name %q, want %q", row.FirstPath, first)
	}
	if row.BytesFromDisk != 0 || row.PagesMissed != 0 || row.IOWaitNS != 0 || row.MissCPUNS != 0 {
		t.Errorf("row reads from disk: %d bytes, %d pages missed, %d ns waited, %d ns filling",
			row.BytesFromDisk, row.PagesMissed, row.IOWaitNS, row.MissCPUNS)
	}
}
