package advice

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// TestPersistExportsTheVariableTheFrameworkReads: torch looks in
// $TORCH_HOME/hub, so a torch.hub cache at …/home/hub is kept by
// TORCH_HOME=…/home, not by TORCH_HOME=…/home/hub (which would move it).
func TestPersistExportsTheVariableTheFrameworkReads(t *testing.T) {
	for _, c := range []struct {
		cache, root, via, movedBy, want string
	}{
		{"torch_hub", "/w/home/hub", "TORCH_HOME", "TORCH_HOME", "export TORCH_HOME='/w/home'"},
		{"torch_hub", "/h/.cache/torch/hub", "default", "TORCH_HOME", "export TORCH_HOME='/h/.cache/torch'"},
		{"huggingface", "/hf/hub", "HF_HOME", "HF_HUB_CACHE", "export HF_HUB_CACHE='/hf/hub'"},
		{"flashinfer", "/w/.cache/flashinfer", "FLASHINFER_WORKSPACE_BASE", "FLASHINFER_WORKSPACE_BASE", "export FLASHINFER_WORKSPACE_BASE='/w'"},
		{"pocl", "/x/pocl/kcache", "XDG_CACHE_HOME", "POCL_CACHE_DIR", "export POCL_CACHE_DIR='/x/pocl/kcache'"},
		{"torch_hub", "/opt/models", "--cache-dir", "", ""},
	} {
		rc := record.Cache{Name: c.cache, Root: c.root, Via: c.via, MovedBy: c.movedBy, EntriesWritten: 1,
			FS: "ext4", Survival: "persistent"}
		got := Exports(PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{rc}}}))
		if strings.Join(got, "\n") != c.want {
			t.Errorf("%s at %s: exports %q, want %q", c.cache, c.root, got, c.want)
		}
	}
}

func TestMovedRootPointsBackThroughTheInverse(t *testing.T) {
	c := record.Cache{Name: "torch_hub", Framework: "torch.hub (weights)", Root: "/n/hub", Via: "TORCH_HOME", MovedBy: "TORCH_HOME",
		Lookups: 1, Misses: 1, CompileNS: 5e6, OtherRoots: []record.OtherRoot{{Path: "/h/.cache/torch/hub", Files: 2, SizeBytes: 10}}}
	m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(m) != 1 || m[0].Action == nil || m[0].ExportVar != "TORCH_HOME" || m[0].ExportValue != "/h/.cache/torch" {
		t.Fatalf("misses = %+v", m)
	}
}

// TestPersistOffTmpfsWithoutAVariableOfItsOwn: PyOpenCL's cache follows
// XDG_CACHE_HOME alone; off a tmpfs it goes back to the default cache
// home, not to a directory named after it below XDG_CACHE_HOME.
func TestPersistOffTmpfsWithoutAVariableOfItsOwn(t *testing.T) {
	rc := record.Cache{Name: "pyopencl", Root: "/run/x/pyopencl", Via: "XDG_CACHE_HOME", MovedBy: "XDG_CACHE_HOME",
		EntriesWritten: 1, FS: "tmpfs", Survival: "lost at reboot"}
	got := Exports(PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{rc}}}))
	if want := `export XDG_CACHE_HOME="$HOME/.cache"`; strings.Join(got, "\n") != want {
		t.Errorf("exports %q, want %q", got, want)
	}
}
