package registry

import (
	"path"
	"regexp"
	"strings"
	"testing"
)

var templateVar = regexp.MustCompile(`\$[A-Za-z0-9_]+`)

// TestInvertRoundTripsEveryVariable inverts, for every template of every
// registry entry, the variable that leads it, and feeds the value back
// to the forward resolution: the cache must land on the same root.
func TestInvertRoundTripsEveryVariable(t *testing.T) {
	seen := map[string]bool{}
	tried := 0
	for i := range Registry {
		s := &Registry[i]
		all := append(append([]string(nil), s.Paths...), s.Also...)
		for _, tmpl := range all {
			for _, v := range templateVar.FindAllString(tmpl, -1) {
				seen[v[1:]] = seen[v[1:]] || false
			}
			name, _, ok := leadVar(tmpl)
			if !ok {
				continue
			}
			// Other parts of the template ({user}) come from the process.
			base := Env{"USER": "alice"}
			want, _, ok := Expand(tmpl, with(base, Assignment{name, "/r/" + s.Name + "/" + strings.ToLower(name)}), Identity{})
			if !ok {
				t.Fatalf("%s %q does not expand", s.Name, tmpl)
			}
			a, ok := Invert(tmpl, want, base, Identity{})
			if !ok || a.Var != name {
				t.Errorf("%s %q: no inverse of %s for %s (got %+v)", s.Name, tmpl, name, want, a)
				continue
			}
			roots := Resolve([]Spec{*s}, with(base, a), Identity{})
			if !hasRoot(roots, want) {
				t.Errorf("%s: %s=%s resolves to %v, want %s", s.Name, a.Var, a.Value, paths(roots), want)
			}
			seen[name] = true
			tried++
		}
	}
	for v, ok := range seen {
		if !ok {
			t.Errorf("variable %s is in a template but was never inverted", v)
		}
	}
	if tried < 40 {
		t.Errorf("only %d templates inverted", tried)
	}
}

func hasRoot(roots []Root, p string) bool {
	for _, r := range roots {
		if r.Path == p {
			return true
		}
	}
	return false
}

func paths(roots []Root) []string {
	var out []string
	for _, r := range roots {
		out = append(out, r.Path)
	}
	return out
}

func TestInvertRefusesWrongShape(t *testing.T) {
	for _, c := range []struct{ tmpl, root string }{
		{"$TORCH_HOME/hub", "/data/models"},
		{"$TORCH_HOME/hub", "/hub"},
		{"/tmp/pocl/kcache", "/tmp/pocl/kcache"},
		{"**/__pycache__", "/src/__pycache__"},
		{"$HF_HUB_CACHE", "relative/dir"},
		{"{tmp}/torchinductor_{user}", "/scratch/torchinductor_bob"},
	} {
		if a, ok := Invert(c.tmpl, c.root, Env{"USER": "alice"}, Identity{}); ok {
			t.Errorf("Invert(%q, %q) = %+v, want none", c.tmpl, c.root, a)
		}
	}
}

// TestExportForNamesTheVariableThatFindsTheRoot checks the advice for the
// roots each framework resolves: the variable and value that, set alone,
// bring the cache back to that root.
func TestExportForNamesTheVariableThatFindsTheRoot(t *testing.T) {
	for _, c := range []struct {
		cache, root, v, value string
	}{
		{"torch_hub", "/t/home/hub", "TORCH_HOME", "/t/home"},
		{"torch_hub", "/h/.cache/torch/hub", "TORCH_HOME", "/h/.cache/torch"},
		{"huggingface", "/h/.cache/huggingface/hub", "HF_HUB_CACHE", "/h/.cache/huggingface/hub"},
		{"triton", "/th/.triton/cache", "TRITON_CACHE_DIR", "/th/.triton/cache"},
		{"flashinfer", "/w/.cache/flashinfer", "FLASHINFER_WORKSPACE_BASE", "/w"},
		{"numba", "/c/numba", "NUMBA_CACHE_DIR", "/c/numba"},
		{"pocl", "/x/pocl/kcache", "POCL_CACHE_DIR", "/x/pocl/kcache"},
		{"python", "/pyc", "PYTHONPYCACHEPREFIX", "/pyc"},
		{"torch_hub", "/data/models", "", ""},
		{"torch_tensorrt", "/tmp/torch_tensorrt_engine_cache", "", ""},
		{"python", "**/__pycache__", "", ""},
	} {
		s, _ := Lookup(c.cache)
		a, ok := s.ExportFor(c.root)
		if a.Var != c.v || a.Value != c.value || ok != (c.v != "") {
			t.Errorf("%s %s: got %+v %v, want %s=%s", c.cache, c.root, a, ok, c.v, c.value)
		}
	}
	// Every root a registry template resolves to, whatever variable put
	// it there, has an export that alone resolves to it again.
	for i := range Registry {
		s := &Registry[i]
		for _, tmpl := range append(append([]string(nil), s.Paths...), s.Also...) {
			name, _, ok := leadVar(tmpl)
			if !ok || !strings.HasPrefix(tmpl, "$") {
				continue
			}
			root, _, _ := Expand(tmpl, Env{name: "/r/x", "USER": "alice"}, Identity{})
			a, ok := s.ExportFor(root)
			if !ok {
				t.Errorf("%s: no export for %s (from %q)", s.Name, root, tmpl)
				continue
			}
			if got := Resolve([]Spec{*s}, Env{a.Var: a.Value}, Identity{}); !hasRoot(got, path.Clean(root)) {
				t.Errorf("%s: export %s=%s resolves to %v, want %s", s.Name, a.Var, a.Value, paths(got), root)
			}
		}
	}
}

// TestWeightsCachesSayWeights: attribution tells a cache of downloaded
// weights from a compile cache by its framework name alone (the record
// carries no more), so every cache that does not compile says "(weights)".
func TestWeightsCachesSayWeights(t *testing.T) {
	for _, s := range Registry {
		if s.Compiles == strings.HasSuffix(s.Framework, "(weights)") {
			t.Errorf("%s: Compiles %v but framework %q", s.Name, s.Compiles, s.Framework)
		}
	}
}
