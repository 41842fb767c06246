package kcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coldtrace/coldtrace/internal/testenv"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/residency"
)

func TestPlanPointsEveryCacheAtFreshDirs(t *testing.T) {
	env := registry.Env{"HOME": "/home/u", "USER": "u", "TRITON_CACHE_DIR": "/data/triton", "HF_HOME": "/data/hf"}
	id := registry.Identity{UID: 1000, User: "u", Home: "/home/u", Cwd: "/work"}
	const tmp = "/tmp/coldtrace-cold-1"

	p := Plan(registry.Registry, env, DefaultClasses, tmp)
	got := map[string]string{}
	for _, o := range p.Overrides {
		got[o.Env] = o.Dir
	}
	for _, v := range []string{"TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "NUMBA_CACHE_DIR",
		"POCL_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR", "PYTORCH_KERNEL_CACHE_PATH", "MESA_SHADER_CACHE_DIR"} {
		if !strings.HasPrefix(got[v], tmp+"/") {
			t.Errorf("%s = %q, want a directory under %s", v, got[v], tmp)
		}
	}
	for _, v := range []string{"PYTHONPYCACHEPREFIX", "HF_HUB_CACHE", "JAX_COMPILATION_CACHE_DIR", "HF_HOME"} {
		if _, ok := got[v]; ok {
			t.Errorf("default classes set %s", v)
		}
	}
	untouched := map[string]string{}
	for _, u := range p.Untouched {
		untouched[u.Cache] = u.Reason
	}
	if !strings.Contains(untouched["jax"], "off") || !strings.Contains(untouched["torch_tensorrt"], "no environment variable") {
		t.Errorf("untouched: %v", untouched)
	}

	// With the plan applied, every cache of the chosen classes resolves
	// under the fresh root, the one the user had set included.
	environ := p.Apply([]string{"HOME=/home/u", "USER=u", "TRITON_CACHE_DIR=/data/triton", "HF_HOME=/data/hf"})
	var joined []byte
	for _, kv := range environ {
		joined = append(append(joined, kv...), 0)
	}
	if strings.Count(string(joined), "TRITON_CACHE_DIR=") != 1 {
		t.Errorf("TRITON_CACHE_DIR appears more than once: %q", environ)
	}
	for _, r := range registry.Resolve(registry.Registry, registry.ParseEnviron(joined), id) {
		if ClassOf(*r.Spec) != JIT || untouched[r.Spec.Name] != "" || r.Anywhere != "" || r.Via == "default" {
			continue
		}
		if !strings.HasPrefix(r.Path, tmp+"/") {
			t.Errorf("%s resolves to %s (via %s) after the plan", r.Spec.Name, r.Path, r.Via)
		}
	}

	// Opt-in classes; JAX once the user turned its cache on.
	env["JAX_COMPILATION_CACHE_DIR"] = "/data/jax"
	p = Plan(registry.Registry, env, []Class{Pycache, Downloads, JIT}, tmp)
	got = map[string]string{}
	for _, o := range p.Overrides {
		got[o.Env] = o.Dir
	}
	for _, v := range []string{"PYTHONPYCACHEPREFIX", "HF_HUB_CACHE", "TORCH_HOME", "JAX_COMPILATION_CACHE_DIR"} {
		if !strings.HasPrefix(got[v], tmp+"/") {
			t.Errorf("%s = %q with pycache,downloads", v, got[v])
		}
	}
	// HF_HOME holds the login token: never moved, even where it is the
	// only variable that would move a cache.
	for _, v := range []string{"HF_HOME", "HOME", "XDG_CACHE_HOME"} {
		if _, ok := got[v]; ok {
			t.Errorf("the plan sets %s", v)
		}
	}
	hfOnly := []registry.Spec{{Name: "hf_like", Paths: []string{"$HF_HOME/hub", "~/.cache/huggingface/hub"}}}
	p = Plan(hfOnly, env, []Class{Downloads}, tmp)
	if len(p.Untouched) != 1 || !strings.Contains(p.Untouched[0].Reason, "login token") {
		t.Errorf("a cache only $HF_HOME moves: untouched %v", p.Untouched)
	}
	for _, o := range p.Overrides {
		if o.Env != "TORCH_HOME" {
			t.Errorf("a cache only $HF_HOME moves: override %v", o)
		}
	}
}

func TestParseClasses(t *testing.T) {
	if c, err := ParseClasses(""); err != nil || len(c) != 2 || c[0] != PageCache || c[1] != JIT {
		t.Errorf("default: %v %v", c, err)
	}
	if c, err := ParseClasses("jit, pycache,jit"); err != nil || len(c) != 2 || c[1] != Pycache {
		t.Errorf("list: %v %v", c, err)
	}
	if _, err := ParseClasses("jit,gpu"); err == nil || !strings.Contains(err.Error(), `"gpu"`) {
		t.Errorf("bad class: %v", err)
	}
}

func TestCreate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cold")
	p := Plan(registry.Registry, registry.Env{"HOME": "/home/u"}, []Class{JIT}, root)
	if err := p.Create(os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Overrides {
		ents, err := os.ReadDir(o.Dir)
		if err != nil || len(ents) != 0 {
			t.Errorf("%s: %v %v", o.Dir, ents, err)
		}
	}
}

func mkfile(t *testing.T, p string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// survey builds a Triton and a Numba cache as the frameworks lay them
// out and surveys them.
func survey(t *testing.T, base string) map[string]Cache {
	t.Helper()
	triton, numba := filepath.Join(base, "triton"), filepath.Join(base, "numba")
	for _, key := range []string{"AAAA", "BBBB", "CCCC"} {
		mkfile(t, filepath.Join(triton, key, "k.cubin"), 1000)
		mkfile(t, filepath.Join(triton, key, "k.json"), 24)
	}
	mkfile(t, filepath.Join(triton, "AAAA", "tmp.pid_12_abc", "k.ptx"), 50) // a fill in progress
	mkfile(t, filepath.Join(numba, "mod.f-3.py312.nbi"), 10)
	mkfile(t, filepath.Join(numba, "mod.f-3.py312.1.nbc"), 10)
	mkfile(t, filepath.Join(numba, "mod.f-3.py312.nbi.tmp.123"), 10)
	env := registry.Env{"HOME": filepath.Join(base, "home"), "TRITON_CACHE_DIR": triton, "NUMBA_CACHE_DIR": numba,
		"TRITON_ALWAYS_COMPILE": "1", "HF_HUB_OFFLINE": "1"}
	roots := registry.Resolve(registry.Registry, env, registry.Identity{Cwd: base})
	out := map[string]Cache{}
	for _, c := range Survey(residency.Self{}, roots, env, Options{}) {
		if _, dup := out[c.Name]; !dup { // the root Paths chose, not an Also root
			out[c.Name] = c
		}
	}
	return out
}

func TestSurvey(t *testing.T) {
	base := t.TempDir()
	cs := survey(t, base)
	tr := cs["triton"]
	if !tr.Exists || tr.Entries != 3 || tr.Files != 6 || tr.SizeBytes != 3*1024 || tr.Via != "TRITON_CACHE_DIR" {
		t.Errorf("triton: %+v", tr)
	}
	if len(tr.Disabled) != 1 || !strings.HasPrefix(tr.Disabled[0], "TRITON_ALWAYS_COMPILE=1: ") {
		t.Errorf("triton switches: %v", tr.Disabled)
	}
	// Offline is no off switch: the hub cache is read, not downloaded to.
	if hf := cs["huggingface"]; len(hf.Disabled) != 0 || len(hf.Offline) != 1 ||
		!strings.HasPrefix(hf.Offline[0], "HF_HUB_OFFLINE=1: offline") || len(hf.Switches) != 0 {
		t.Errorf("huggingface: %+v", hf)
	}
	if nb := cs["numba"]; nb.Entries != 2 || nb.Files != 2 {
		t.Errorf("numba: %+v", nb)
	}
	if cuda := cs["cuda"]; cuda.Exists || cuda.FS == nil || !cuda.FS.Missing || cuda.Root != filepath.Join(base, "home", ".nv", "ComputeCache") {
		t.Errorf("cuda (absent): %+v", cuda)
	}
	if py := cs["python"]; !py.InTree || py.FS != nil {
		t.Errorf("python (in-tree): %+v", py)
	}
}

// A cache on a tmpfs the test mounts is seen as lost at reboot.
func TestSurveyTmpfs(t *testing.T) {
	testenv.RequireRoot(t)
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	cs := survey(t, mnt)
	if tr := cs["triton"]; tr.FS == nil || tr.FS.FS != "tmpfs" || tr.FS.Survival != residency.LostAtReboot || tr.Entries != 3 {
		t.Errorf("triton on tmpfs: %+v %+v", tr, tr.FS)
	}
}
