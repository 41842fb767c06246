package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/report/words"
)

// writableFUSE mounts testdata/workloads/fuseslow.py read-write over an
// empty directory, with opts ("--fail-rename=EBUSY"), and returns the
// mount point.
func writableFUSE(t *testing.T, opts ...string) string {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import fusepy").Run(); err != nil {
		t.Skipf("no fusepy for /usr/bin/python3 (Debian python3-fusepy): %v", err)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "coldtrace-fuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	back, mnt := filepath.Join(dir, "back"), filepath.Join(dir, "mnt")
	for _, d := range []string{back, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{workloadPath(t, "fuseslow.py"), back, mnt, "0", "--rw"}, opts...)
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Unmount(mnt, unix.MNT_DETACH)
		cancel()
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var st unix.Statfs_t
		if err := unix.Statfs(mnt, &st); err == nil && st.Type == unix.FUSE_SUPER_MAGIC {
			return mnt
		}
		if time.Now().After(deadline) {
			t.Fatalf("the FUSE fixture did not mount: %s", errb.String())
		}
	}
}

// brokenKernels is how many kernels the Triton-shaped workload compiles.
const brokenKernels = 4

// TestBrokenSharedCacheIsReported: a Triton-shaped cache on a FUSE mount
// whose renames fail with EBUSY compiles every kernel and keeps none.
// coldtrace counts the failed renames (two per kernel), names the cache
// under the verdict, charges the compiles to it and keeps them in the
// warm estimate; with renames that succeed, every entry is written and
// there is no finding.
func TestBrokenSharedCacheIsReported(t *testing.T) {
	requireTracing(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("needs cc as the workload's compiler")
	}
	for _, fail := range []bool{true, false} {
		name := "renames fail"
		if !fail {
			name = "renames succeed"
		}
		t.Run(name, func(t *testing.T) {
			var opts []string
			if fail {
				opts = append(opts, "--fail-rename=EBUSY")
			}
			root := filepath.Join(writableFUSE(t, opts...), "triton")
			out := filepath.Join(t.TempDir(), "run.rec")
			code, stdout, stderr := coldtrace(t, []string{"TRITON_CACHE_DIR=" + root}, "-o", out, "--",
				"/usr/bin/python3", workloadPath(t, "tritonlike.py"), strconv.Itoa(brokenKernels))
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			rec := readRecord(t, out)
			res := attribution.Analyze(rec)
			broken := advice.BrokenCaches(rec)
			if !fail {
				if len(broken) != 0 || res.NotKeptNS != 0 {
					t.Errorf("a cache that kept its entries is reported: %+v (not kept %d ns)", broken, res.NotKeptNS)
				}
				if want := strings.Repeat("kept\n", brokenKernels); stdout != want {
					t.Errorf("the workload says %q, want %q", stdout, want)
				}
				return
			}
			if len(broken) != 1 || broken[0].Cache != "triton" || broken[0].Inferred {
				t.Fatalf("broken caches = %+v, want the triton cache, seen failing", broken)
			}
			b := broken[0]
			t.Logf("%s; warm estimate %v of %v wall, %v of compiles not kept", words.Finding(b),
				time.Duration(res.WarmEstimateNS), time.Duration(rec.WallNS), time.Duration(res.NotKeptNS))
			f := b.Failures[0]
			if f.Op != "rename" || f.Errno != "EBUSY" || f.Count != 2*brokenKernels || len(b.Failures) != 1 {
				t.Errorf("failures = %+v, want %d renames failing with EBUSY", b.Failures, 2*brokenKernels)
			}
			if !strings.Contains(stderr, "finding: "+words.Finding(b)) {
				t.Errorf("the verdict does not name the cache %q:\n%s", words.Finding(b), stderr)
			}
			jit := res.Row(attribution.JITCompile)
			if jit == nil || jit.NS == 0 || b.CompileNS == 0 {
				t.Fatalf("no compile time (row %+v, finding %d ns)", jit, b.CompileNS)
			}
			// Every compile ran under the failing process: none of it is
			// promised away.
			if res.NotKeptNS < jit.NS*9/10 || res.WarmEstimateNS < res.NotKeptNS {
				t.Errorf("jit_compile %d ns, not kept %d ns, warm estimate %d ns: the estimate counts on compiles that were not kept",
					jit.NS, res.NotKeptNS, res.WarmEstimateNS)
			}
		})
	}
}

// TestBrokenBytecodeCacheIsInferred: Python's bytecode cache is told
// from page-cache records, without the path syscalls, so a failed rename
// of a .pyc into place is not seen. With PYTHONPYCACHEPREFIX on a FUSE
// mount whose renames fail, every .pyc written is gone at the end:
// coldtrace infers that the cache did not keep its entries, says it is
// inferred, and keeps those compiles in the warm estimate; with renames
// that succeed, no finding.
func TestBrokenBytecodeCacheIsInferred(t *testing.T) {
	requireTracing(t)
	for _, fail := range []bool{true, false} {
		name := "renames fail"
		if !fail {
			name = "renames succeed"
		}
		t.Run(name, func(t *testing.T) {
			var opts []string
			if fail {
				opts = append(opts, "--fail-rename=EBUSY")
			}
			prefix := filepath.Join(writableFUSE(t, opts...), "pyc")
			out := filepath.Join(t.TempDir(), "run.rec")
			code, _, stderr := coldtrace(t, []string{"PYTHONPYCACHEPREFIX=" + prefix, "PYTHONDONTWRITEBYTECODE="}, "-o", out, "--",
				"/usr/bin/python3", "-c", "import json, csv, decimal, fractions, statistics, email.parser")
			if code != 0 {
				t.Fatalf("coldtrace exited %d:\n%s", code, stderr)
			}
			rec := readRecord(t, out)
			res := attribution.Analyze(rec)
			broken := advice.BrokenCaches(rec)
			if !fail {
				if len(broken) != 0 || res.NotKeptNS != 0 {
					t.Errorf("a cache that kept its entries is reported: %+v (not kept %d ns)", broken, res.NotKeptNS)
				}
				written := false
				for _, c := range rec.JIT.Caches {
					if c.Name == "python" && c.Root == prefix {
						written = c.EntriesWritten >= 10 && c.EntriesGone == 0
						t.Logf("the bytecode cache wrote %d entries, %d gone", c.EntriesWritten, c.EntriesGone)
					}
				}
				if !written {
					t.Errorf("the bytecode cache at %s did not write at least 10 entries, all kept", prefix)
				}
				return
			}
			if len(broken) != 1 || broken[0].Cache != "python" || !broken[0].Inferred {
				t.Fatalf("broken caches = %+v, want the python cache, inferred", broken)
			}
			b := broken[0]
			t.Logf("%s; warm estimate %v of %v wall, %v of compiles not kept", words.Finding(b),
				time.Duration(res.WarmEstimateNS), time.Duration(rec.WallNS), time.Duration(res.NotKeptNS))
			if b.EntriesWritten < 10 || b.EntriesGone != b.EntriesWritten {
				t.Errorf("%d of %d entries gone, want all of at least 10", b.EntriesGone, b.EntriesWritten)
			}
			if !strings.Contains(words.Finding(b), "inferred") {
				t.Errorf("the finding does not say it is inferred: %q", words.Finding(b))
			}
			if !strings.Contains(stderr, "finding: "+words.Finding(b)) {
				t.Errorf("the verdict does not name the cache %q:\n%s", words.Finding(b), stderr)
			}
			if res.NotKeptNS == 0 || res.WarmEstimateNS < res.NotKeptNS {
				t.Errorf("not kept %d ns, warm estimate %d ns: the estimate counts on compiles that were not kept", res.NotKeptNS, res.WarmEstimateNS)
			}
		})
	}
}
