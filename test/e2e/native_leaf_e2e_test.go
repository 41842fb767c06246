package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/e2eutil"
	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/record"
)

// leafOf is the one native frame of the stack at idx, or nil.
func leafOf(r *record.Record, idx int) *record.PyFrame {
	st := r.StackAt(idx)
	if st == nil || len(st.Frames) != 1 || !st.Frames[0].Native {
		return nil
	}
	return &st.Frames[0]
}

// TestProgramWithoutPythonChargesReadsAndDownloadToItsLeaf: a C program
// that reads an evicted file and downloads from a loopback server has no
// Python stack; its file's disk time and its download are charged to
// its leaf native frames, the C library's read and connect wrappers,
// named from the library's symbols in the record and the text.
func TestProgramWithoutPythonChargesReadsAndDownloadToItsLeaf(t *testing.T) {
	testenv.RequireTracing(t)
	bin := buildC(t, "readfetch")
	data := e2eutil.EvictableFile(t, 16<<20)
	srv := hubServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	rec, out := filepath.Join(dir, "rec.json"), filepath.Join(dir, "model.bin")
	r := runCT(t, ctOptions{}, "run", "-q", "-o", rec, "--", bin, data, strconv.Itoa(port), out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := readRecord(t, rec)
	isLibc := func(f *record.PyFrame, names ...string) bool {
		if f == nil || !strings.HasPrefix(filepath.Base(f.File), "libc.so") || f.Line != 0 {
			return false
		}
		for _, n := range names {
			if f.Func == n {
				return true
			}
		}
		return false
	}
	reads := []string{"read", "__read", "__libc_read"}
	f := fileByPath(t, got, data)
	if f.BytesFromDisk == 0 {
		t.Fatalf("%s was not read from disk (evicted before the run?)", data)
	}
	if len(f.Stacks) == 0 {
		t.Fatalf("%s carries no stack", data)
	}
	if !isLibc(leafOf(got, f.Stacks[0].Stack), reads...) {
		var leaves []string
		for _, sc := range f.Stacks {
			leaves = append(leaves, fmt.Sprintf("%+v %d ns", leafOf(got, sc.Stack), sc.NS))
		}
		t.Errorf("file stacks %v: want the C library's read wrapper first", leaves)
	} else if total := f.IOWaitNS + f.MissCPUNS + f.FillWaitNS; f.Stacks[0].NS*4 < total {
		t.Errorf("the read wrapper carries %d ns of the file's %d ns", f.Stacks[0].NS, total)
	}

	connects := []string{"connect", "__connect", "__libc_connect"}
	var dl *record.Download
	for i := range got.Downloads {
		if got.Downloads[i].Path == out {
			dl = &got.Downloads[i]
		}
	}
	if dl == nil {
		t.Fatalf("no download into %s: %+v", out, got.Downloads)
	}
	if len(dl.Stacks) == 0 {
		t.Fatalf("the download into %s carries no stack", out)
	}
	if !isLibc(leafOf(got, dl.Stacks[0].Stack), connects...) || dl.Stacks[0].Bytes == 0 {
		var leaves []string
		for _, sc := range dl.Stacks {
			leaves = append(leaves, fmt.Sprintf("%+v %d bytes", leafOf(got, sc.Stack), sc.Bytes))
		}
		t.Errorf("download stacks %v: want the C library's connect wrapper", leaves)
	}

	text := runCT(t, ctOptions{}, "report", rec)
	_, readSites, _ := strings.Cut(text.stdout, "where in the code: disk reads\n")
	_, dlSites, _ := strings.Cut(text.stdout, "where in the code: downloads\n")
	if leaf := leafOf(got, f.Stacks[0].Stack); leaf == nil || !strings.Contains(readSites, "libc.so.6 "+leaf.Func+" (native)") {
		t.Errorf("the report names no read wrapper under disk reads:\n%s", text.stdout)
	}
	if leaf := leafOf(got, dl.Stacks[0].Stack); leaf == nil || !strings.Contains(dlSites, "libc.so.6 "+leaf.Func+" (native)") {
		t.Errorf("the report names no connect wrapper under downloads:\n%s", text.stdout)
	}
	if rl, cl := leafOf(got, f.Stacks[0].Stack), leafOf(got, dl.Stacks[0].Stack); rl != nil && cl != nil {
		t.Logf("read leaf %s, connect leaf %s", rl.Func, cl.Func)
	}
}
