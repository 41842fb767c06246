package registry

import (
	"path"
	"testing"
)

// rootOf resolves name's first root for env.
func rootOf(t *testing.T, name string, env Env, id Identity) (string, string) {
	t.Helper()
	s, ok := Lookup(name)
	if !ok {
		t.Fatalf("no registry entry %q", name)
	}
	roots := Resolve([]Spec{s}, env, id)
	if len(roots) == 0 {
		return "", ""
	}
	return roots[0].Path, roots[0].Via
}

func TestResolve(t *testing.T) {
	root := Identity{UID: 0, User: "root", Home: "/root", Cwd: "/work"}
	tests := []struct {
		name, cache string
		env         Env
		id          Identity
		want, via   string
	}{
		{"triton dir", "triton", Env{"TRITON_CACHE_DIR": "/data/tc", "TRITON_HOME": "/th", "HOME": "/home/a"}, root, "/data/tc", "TRITON_CACHE_DIR"},
		{"triton home", "triton", Env{"TRITON_HOME": "/th", "HOME": "/home/a"}, root, "/th/.triton/cache", "TRITON_HOME"},
		{"triton default", "triton", Env{"HOME": "/home/a"}, root, "/home/a/.triton/cache", "default"},
		{"triton no HOME", "triton", Env{}, root, "/root/.triton/cache", "default"},
		{"triton relative", "triton", Env{"TRITON_CACHE_DIR": "cache/t"}, root, "/work/cache/t", "TRITON_CACHE_DIR"},
		{"triton empty var", "triton", Env{"TRITON_CACHE_DIR": "", "HOME": "/home/a"}, root, "/home/a/.triton/cache", "default"},
		{"torch kernels xdg", "torch_kernels", Env{"XDG_CACHE_HOME": "/x", "HOME": "/home/a"}, root, "/x/torch/kernels", "XDG_CACHE_HOME"},
		{"torch kernels path", "torch_kernels", Env{"PYTORCH_KERNEL_CACHE_PATH": "/k", "XDG_CACHE_HOME": "/x"}, root, "/k", "PYTORCH_KERNEL_CACHE_PATH"},
		{"torch kernels default", "torch_kernels", Env{"HOME": "/home/a"}, root, "/home/a/.cache/torch/kernels", "default"},
		{"inductor dir", "inductor", Env{"TORCHINDUCTOR_CACHE_DIR": "/ind", "USER": "alice"}, root, "/ind", "TORCHINDUCTOR_CACHE_DIR"},
		// The invoking user's name from the command's environment, not
		// coldtrace's (root).
		{"inductor default user", "inductor", Env{"USER": "alice", "HOME": "/home/alice"}, root, "/tmp/torchinductor_alice", "default"},
		{"inductor LOGNAME first", "inductor", Env{"LOGNAME": "bob", "USER": "alice"}, root, "/tmp/torchinductor_bob", "default"},
		{"inductor TMPDIR", "inductor", Env{"USER": "alice", "TMPDIR": "/scratch"}, root, "/scratch/torchinductor_alice", "default"},
		{"inductor passwd name", "inductor", Env{}, Identity{UID: 1000, User: "carol", Home: "/home/carol"}, "/tmp/torchinductor_carol", "default"},
		{"inductor no user", "inductor", Env{}, Identity{UID: 1234}, "", ""},
		{"hf hub cache", "huggingface", Env{"HF_HUB_CACHE": "/hub", "HF_HOME": "/hf", "XDG_CACHE_HOME": "/x"}, root, "/hub", "HF_HUB_CACHE"},
		{"hf legacy", "huggingface", Env{"HUGGINGFACE_HUB_CACHE": "/old", "HF_HOME": "/hf"}, root, "/old", "HUGGINGFACE_HUB_CACHE"},
		{"hf home", "huggingface", Env{"HF_HOME": "/hf", "XDG_CACHE_HOME": "/x"}, root, "/hf/hub", "HF_HOME"},
		{"hf xdg", "huggingface", Env{"XDG_CACHE_HOME": "/x", "HOME": "/home/a"}, root, "/x/huggingface/hub", "XDG_CACHE_HOME"},
		{"hf default", "huggingface", Env{"HOME": "/home/a"}, root, "/home/a/.cache/huggingface/hub", "default"},
		{"cuda", "cuda", Env{"CUDA_CACHE_PATH": "/cc"}, root, "/cc", "CUDA_CACHE_PATH"},
		{"pocl xdg", "pocl", Env{"XDG_CACHE_HOME": "/x"}, root, "/x/pocl/kcache", "XDG_CACHE_HOME"},
		{"pocl no home", "pocl", Env{}, Identity{}, "/tmp/pocl/kcache", "default"},
		{"jax off", "jax", Env{"HOME": "/h"}, root, "", ""},
		{"flashinfer base", "flashinfer", Env{"FLASHINFER_WORKSPACE_BASE": "/w"}, root, "/w/.cache/flashinfer", "FLASHINFER_WORKSPACE_BASE"},
		{"python prefix", "python", Env{"PYTHONPYCACHEPREFIX": "/pyc"}, root, "/pyc", "PYTHONPYCACHEPREFIX"},
		{"python in tree", "python", Env{}, root, "**/__pycache__", "in-tree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, via := rootOf(t, tt.cache, tt.env, tt.id)
			if got != tt.want || via != tt.via {
				t.Errorf("got %q via %q, want %q via %q", got, via, tt.want, tt.via)
			}
		})
	}
}

func TestResolveAlso(t *testing.T) {
	s, _ := Lookup("triton")
	roots := Resolve([]Spec{s}, Env{"HOME": "/home/a", "TORCHINDUCTOR_CACHE_DIR": "/ind", "USER": "alice"}, Identity{})
	var got []string
	for _, r := range roots {
		got = append(got, r.Path)
	}
	want := []string{"/home/a/.triton/cache", "/ind/triton", "/tmp/torchinductor_alice/triton"}
	if len(got) != len(want) {
		t.Fatalf("roots %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("roots %v, want %v", got, want)
		}
	}
}

func TestParseEnviron(t *testing.T) {
	env := ParseEnviron([]byte("A=1\x00B=x=y\x00A=2\x00junk\x00=v\x00C=\x00"))
	if env["A"] != "1" || env["B"] != "x=y" || len(env) != 3 {
		t.Errorf("env %v", env)
	}
}

func TestParseCacheDir(t *testing.T) {
	if n, d, ok := ParseCacheDir("mine=rel/dir", "/cwd"); !ok || n != "mine" || d != "/cwd/rel/dir" {
		t.Errorf("got %q %q %v", n, d, ok)
	}
	for _, bad := range []string{"nopath", "=x", "x="} {
		if _, _, ok := ParseCacheDir(bad, "/"); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSwitches(t *testing.T) {
	s, _ := Lookup("cuda")
	got := s.SwitchesOn(Env{"CUDA_CACHE_DISABLE": "1", "CUDA_FORCE_PTX_JIT": "0", "CUDA_CACHE_MAXSIZE": "1073741824"})
	if len(got) != 1 || got[0].Env != "CUDA_CACHE_DISABLE=1" {
		t.Errorf("switches %+v", got)
	}
	if l := s.LimitIn(Env{"CUDA_CACHE_MAXSIZE": "1073741824"}); l != 1<<30 {
		t.Errorf("limit %d", l)
	}
	p, _ := Lookup("python")
	if got := p.SwitchesOn(Env{"PYTHONDONTWRITEBYTECODE": "x"}); len(got) != 1 {
		t.Errorf("PYTHONDONTWRITEBYTECODE: %+v", got)
	}
}

// Every registry row is well formed: a name, a path, valid globs.
func TestRegistryWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Registry {
		if s.Name == "" || seen[s.Name] || len(s.Paths) == 0 || s.Source == "" || s.Hit == "" {
			t.Errorf("bad registry entry %+v", s)
		}
		seen[s.Name] = true
		for _, list := range [][]string{s.Entries, s.Temp, s.Ignore, s.Uses} {
			for _, g := range list {
				if _, err := path.Match(g, ""); err != nil {
					t.Errorf("%s: bad glob %q: %v", s.Name, g, err)
				}
			}
		}
	}
}
