package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
)

// The tests here follow coldtrace's persist advice as a user would: run a
// workload with its cache in a non-default place, take the export lines
// `report --persist` prints, source them in sh in place of the setting
// that put the cache there, rerun, and check the rerun finds the cache.

// persistScript writes `report --persist` of rec to a script, checks sh
// accepts it and returns it with the variables sourcing it sets.
func persistScript(t *testing.T, rec, home string) (string, map[string]string) {
	t.Helper()
	code, out, stderr := coldtrace(t, nil, "report", "--persist", rec)
	if code != 0 {
		t.Fatalf("report --persist: exit %d\n%s", code, stderr)
	}
	t.Logf("report --persist:\n%s", out)
	script := filepath.Join(t.TempDir(), "persist.sh")
	if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	envOf := func(src string) map[string]string {
		b, err := exec.Command("env", "-i", "HOME="+home, "sh", "-c", src+"env", script).Output()
		if err != nil {
			t.Fatalf("source %s: %v", script, err)
		}
		m := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				m[k] = v
			}
		}
		return m
	}
	before, after := envOf(""), envOf(`. "$0" || exit 1; `)
	set := map[string]string{}
	for k, v := range after {
		if before[k] != v {
			set[k] = v
		}
	}
	return script, set
}

// followed traces argv with script sourced first, as a user who pasted
// the export lines into their shell runs it.
func followed(t *testing.T, env []string, script string, argv ...string) *record.Record {
	t.Helper()
	r, _ := adviceRun(t, env, append([]string{"sh", "-c", `. "$0" && exec "$@"`, script}, argv...)...)
	return r
}

// cacheNamed returns the record's cache name that had lookups.
func cacheNamed(t *testing.T, r *record.Record, name string) record.Cache {
	t.Helper()
	var roots []string
	probes := "no JIT section"
	if r.JIT != nil {
		for _, c := range r.JIT.Caches {
			if c.Name == name && c.Lookups > 0 {
				return c
			}
			roots = append(roots, fmt.Sprintf("%s=%s (%d lookups, %d written)", c.Name, c.Root, c.Lookups, c.EntriesWritten))
		}
		// Whether the path-syscall probes were on when the lookups ran.
		probes = fmt.Sprintf("path syscalls %s; spans %+v", r.JIT.PathSyscalls, r.JIT.PathSyscallSpans)
	}
	sort.Strings(roots)
	t.Fatalf("no %s cache with lookups in the record; caches %v; %s; warnings %q", name, roots, probes, r.Warnings)
	return record.Cache{}
}

// wantHits checks the rerun found every entry it looked up in root.
func wantHits(t *testing.T, c record.Cache, root string) {
	t.Helper()
	if c.Root != root || c.Hits == 0 || c.Misses != 0 {
		t.Errorf("%s cache after following the advice: root %s, %d lookups, %d hits, %d misses; want root %s, hits and no miss",
			c.Name, c.Root, c.Lookups, c.Hits, c.Misses, root)
	}
}

func needPython(t *testing.T, module, pkg string) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import "+module).Run(); err != nil {
		t.Skipf("no %s for /usr/bin/python3 (Debian %s): %v", module, pkg, err)
	}
}

func writeScript(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const hubLoad = `import sys, torch.hub
sd = torch.hub.load_state_dict_from_url(sys.argv[1], progress=False, file_name="w.pth")
print(torch.hub.get_dir(), sd["w"].numel())
`

// torch looks in $TORCH_HOME/hub: a cache placed by TORCH_HOME or by
// XDG_CACHE_HOME is kept by the TORCH_HOME the advice names, and the
// rerun loads the checkpoint without asking the server again.
func TestAdviceFollowedTorchHub(t *testing.T) {
	requireTracing(t)
	needPython(t, "torch.hub", "python3-torch")
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "w.pth")
	save := `import sys, torch; torch.save({"w": torch.arange(1 << 20, dtype=torch.float32)}, sys.argv[1])`
	if out, err := exec.Command("/usr/bin/python3", "-c", save, ckpt).CombinedOutput(); err != nil {
		t.Fatalf("save checkpoint: %v: %s", err, out)
	}
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		http.ServeFile(w, r, ckpt)
	}))
	t.Cleanup(srv.Close)
	prog := writeScript(t, dir, "hubload.py", hubLoad)
	for _, v := range []struct{ name, sub, root string }{
		{"TORCH_HOME", "home", "home/hub"},
		{"XDG_CACHE_HOME", "xdg", "xdg/torch/hub"},
	} {
		t.Run(v.name, func(t *testing.T) {
			base := t.TempDir()
			home := filepath.Join(base, "user")
			env := []string{"HOME=" + home}
			root := filepath.Join(base, v.root)
			n := gets.Load()
			r, s := adviceRun(t, append(env, v.name+"="+filepath.Join(base, v.sub)), "/usr/bin/python3", prog, srv.URL+"/w.pth")
			if c := cacheNamed(t, r, "torch_hub"); c.Root != root || c.EntriesWritten == 0 {
				t.Fatalf("first run: torch_hub root %s, %d entries written; want %s and entries", c.Root, c.EntriesWritten, root)
			}
			script, set := persistScript(t, s.recPath, home)
			if want := filepath.Dir(root); set["TORCH_HOME"] != want {
				t.Errorf("sourcing the advice sets %v, want TORCH_HOME=%s", set, want)
			}
			if gets.Load() != n+1 {
				t.Fatalf("first run made %d requests, want 1", gets.Load()-n)
			}
			r2 := followed(t, env, script, "/usr/bin/python3", prog, srv.URL+"/w.pth")
			if got := gets.Load() - n - 1; got != 0 {
				t.Errorf("the rerun after following the advice asked the server %d times: the download was repeated", got)
			}
			wantHits(t, cacheNamed(t, r2, "torch_hub"), root)
		})
	}
}

// Numba cache=True with NUMBA_CACHE_DIR: kept where it is when it
// survives; moved off a tmpfs when it does not, and found there by the
// run after the one that fills it.
func TestAdviceFollowedNumba(t *testing.T) {
	requireTracing(t)
	base := t.TempDir()
	prog := adviceNumbaProgram(t, filepath.Join(base, "proj"))
	home := filepath.Join(base, "user")
	env := []string{"HOME=" + home}
	cacheDir := filepath.Join(base, "numba cache")
	r, s := adviceRun(t, append(env, "NUMBA_CACHE_DIR="+cacheDir), "/usr/bin/python3", prog)
	if c := adviceNumbaCache(t, r); c.Root != cacheDir || c.EntriesWritten == 0 {
		t.Fatalf("first run: numba root %s, %d entries written", c.Root, c.EntriesWritten)
	}
	script, set := persistScript(t, s.recPath, home)
	if set["NUMBA_CACHE_DIR"] != cacheDir {
		t.Errorf("sourcing the advice sets %v, want NUMBA_CACHE_DIR=%s", set, cacheDir)
	}
	wantHits(t, cacheNamed(t, followed(t, env, script, "/usr/bin/python3", prog), "numba"), cacheDir)

	mnt := filepath.Join(base, "tmpfs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "coldtrace-test", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	_, s = adviceRun(t, append(env, "NUMBA_CACHE_DIR="+mnt), "/usr/bin/python3", prog)
	script, set = persistScript(t, s.recPath, home)
	moved := set["NUMBA_CACHE_DIR"]
	if moved == "" || strings.HasPrefix(moved, mnt) {
		t.Fatalf("sourcing the advice for a tmpfs cache sets %v, want NUMBA_CACHE_DIR off %s", set, mnt)
	}
	followed(t, env, script, "/usr/bin/python3", prog)
	wantHits(t, cacheNamed(t, followed(t, env, script, "/usr/bin/python3", prog), "numba"), moved)
}

const poclKernel = `import numpy as np, pyopencl as cl
ctx = cl.Context(cl.get_platforms()[0].get_devices())
q = cl.CommandQueue(ctx)
a = np.arange(16, dtype=np.float32)
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
prg = cl.Program(ctx, "__kernel void twice(__global float *a) { a[get_global_id(0)] *= 2.0f; }").build()
prg.twice(q, a.shape, None, buf)
cl.enqueue_copy(q, a, buf)
q.finish()
print(a[3])
`

// PyOpenCL on PoCL with both caches placed by XDG_CACHE_HOME: the advice
// names POCL_CACHE_DIR for PoCL's and XDG_CACHE_HOME for PyOpenCL's (it
// has no variable of its own), and with them the rerun finds both.
func TestAdviceFollowedPoCL(t *testing.T) {
	requireTracing(t)
	needPython(t, "pyopencl", "python3-pyopencl")
	if out, err := exec.Command("/usr/bin/python3", "-c", "import pyopencl as cl; print(cl.get_platforms()[0].name)").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "Portable Computing Language") {
		t.Skipf("no PoCL platform (Debian pocl-opencl-icd): %v: %s", err, out)
	}
	base := t.TempDir()
	prog := writeScript(t, base, "twice.py", poclKernel)
	home := filepath.Join(base, "user")
	env := []string{"HOME=" + home}
	root := filepath.Join(base, "xdg", "pocl", "kcache")
	r, s := adviceRun(t, append(env, "XDG_CACHE_HOME="+filepath.Join(base, "xdg")), "/usr/bin/python3", prog)
	if c := cacheNamed(t, r, "pocl"); c.Root != root || c.EntriesWritten == 0 {
		t.Fatalf("first run: pocl root %s, %d entries written; want %s and entries", c.Root, c.EntriesWritten, root)
	}
	script, set := persistScript(t, s.recPath, home)
	if xdg := filepath.Join(base, "xdg"); set["POCL_CACHE_DIR"] != root || set["XDG_CACHE_HOME"] != xdg {
		t.Errorf("sourcing the advice sets %v, want POCL_CACHE_DIR=%s and XDG_CACHE_HOME=%s (PyOpenCL's cache)", set, root, xdg)
	}
	r2 := followed(t, env, script, "/usr/bin/python3", prog)
	wantHits(t, cacheNamed(t, r2, "pyopencl"), filepath.Join(base, "xdg", "pyopencl"))
	wantHits(t, cacheNamed(t, r2, "pocl"), root)
}

// Python bytecode under PYTHONPYCACHEPREFIX (bytecode writing on: the
// environment here turns it off): with the advice alone the rerun reads
// every module's .pyc from the prefix.
func TestAdviceFollowedPythonBytecode(t *testing.T) {
	requireTracing(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	base := t.TempDir()
	home := filepath.Join(base, "user")
	env := []string{"HOME=" + home, "PYTHONDONTWRITEBYTECODE="}
	prefix := filepath.Join(base, "pyc")
	prog := writeScript(t, base, "imports.py", "import json, decimal, email.parser\nprint(json.dumps(1))\n")
	r, s := adviceRun(t, append(env, "PYTHONPYCACHEPREFIX="+prefix), "/usr/bin/python3", prog)
	if c := cacheNamed(t, r, "python"); c.Root != prefix || c.EntriesWritten == 0 {
		t.Fatalf("first run: python root %s, %d entries written; want %s and entries", c.Root, c.EntriesWritten, prefix)
	}
	script, set := persistScript(t, s.recPath, home)
	if set["PYTHONPYCACHEPREFIX"] != prefix {
		t.Errorf("sourcing the advice sets %v, want PYTHONPYCACHEPREFIX=%s", set, prefix)
	}
	wantHits(t, cacheNamed(t, followed(t, env, script, "/usr/bin/python3", prog), "python"), prefix)
}

// The npm @huggingface/hub client keeps its downloads in the Hugging Face
// hub cache layout, found as huggingface_hub finds it: the export the
// advice prints for that cache must lead it to the same root. Tests
// install nothing from the network: without the package it is skipped.
func TestAdviceFollowedNpmHub(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node")
	}
	if out, err := exec.Command("node", "-e", "require.resolve('@huggingface/hub')").CombinedOutput(); err != nil {
		t.Skipf("the npm package @huggingface/hub is not installed for node (npm install -g @huggingface/hub; tests install nothing): %d bytes of node errors", len(out))
	}
	root := filepath.Join(t.TempDir(), "hf", "hub")
	s, _ := registry.Lookup("huggingface")
	a, ok := s.ExportFor(root)
	if !ok {
		t.Fatalf("no export for a huggingface cache at %s", root)
	}
	cmd := exec.Command("node", "-e", `const h = require('@huggingface/hub');
if (typeof h.getHFHubCachePath !== 'function') process.exit(3);
process.stdout.write(h.getHFHubCachePath());`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), a.Var + "=" + a.Value}
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		t.Skip("this @huggingface/hub exports no getHFHubCachePath to ask where its cache is")
	}
	if err != nil || string(out) != root {
		t.Errorf("with %s=%s, @huggingface/hub's cache is %q (%v), want %s", a.Var, a.Value, out, err, root)
	}
}
