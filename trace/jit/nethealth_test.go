package jit

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// healthFS answers every root with the same health.
type healthFS struct{ h Health }

func (healthFS) Size(string) (int64, bool) { return 0, false }
func (healthFS) IsDir(string) bool         { return false }
func (f healthFS) Health(string) Health    { return f.h }

func hubResult(t *testing.T, h Health, env ...string) record.Cache {
	t.Helper()
	s := newScript(t, Config{})
	s.env(90, append([]string{"HOME=/h"}, env...)...)
	root := "/h/.cache/huggingface/hub"
	if strings.Contains(strings.Join(env, " "), "HF_HOME=/data/hf") {
		root = "/data/hf/hub"
	}
	s.do(90, OpLookup, root+"/models--org--m/refs/main", 0, 3, 0)
	s.do(90, OpOpen, root+"/models--org--m/snapshots/abc/model.safetensors", rd, 3, 0)
	j, _ := s.c.Result(ResultInput{StartMono: 0, WallNS: int64(s.ts), FS: healthFS{h}})
	c := cacheIn(t, j, "huggingface")
	if c.Root != root {
		t.Fatalf("root %s, want %s", c.Root, root)
	}
	return c
}

func hasNote(c record.Cache, prefix string) bool {
	for _, n := range c.Notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// TestHubOffline: HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE (any spelling
// huggingface_hub reads as true) keep the next run off the network: the
// cache says so as Offline with a note, and is not "disabled".
func TestHubOffline(t *testing.T) {
	for _, tc := range []struct {
		env, want string
	}{
		{"HF_HUB_OFFLINE=1", "HF_HUB_OFFLINE=1"},
		{"HF_HUB_OFFLINE=true", "HF_HUB_OFFLINE=true"},
		{"TRANSFORMERS_OFFLINE=YES", "TRANSFORMERS_OFFLINE=YES"},
		{"HF_HUB_OFFLINE=0", ""},
		{"HF_HUB_OFFLINE=", ""},
		{"TRANSFORMERS_OFFLINE=off", ""},
	} {
		c := hubResult(t, Health{FS: "ext4"}, tc.env)
		if c.Offline != tc.want {
			t.Errorf("%s: offline %q, want %q", tc.env, c.Offline, tc.want)
		}
		if c.Disabled != "" {
			t.Errorf("%s: disabled %q: an offline hub still reads its cache", tc.env, c.Disabled)
		}
		if noted := hasNote(c, tc.want+": offline: a rerun cannot download"); tc.want != "" && !noted {
			t.Errorf("%s: notes %q", tc.env, c.Notes)
		}
		if tc.want == "" && len(c.Notes) != 0 {
			t.Errorf("%s: notes %q, want none", tc.env, c.Notes)
		}
	}
	c := hubResult(t, Health{FS: "ext4"}, "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1")
	if c.Offline != "HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1" {
		t.Errorf("both set: offline %q", c.Offline)
	}
}

// TestHubCacheFilesystem: HF_HOME on tmpfs or on a container's overlay
// layer is noted as a cache the next boot or container downloads again.
func TestHubCacheFilesystem(t *testing.T) {
	c := hubResult(t, Health{FS: "tmpfs", Volatile: true}, "HF_HOME=/data/hf")
	if !c.Volatile || !hasNote(c, "on tmpfs: emptied on reboot, so the first run after a boot downloads again") {
		t.Errorf("tmpfs: %+v", c)
	}
	c = hubResult(t, Health{FS: "overlay", ContainerLayer: true}, "HF_HOME=/data/hf")
	if !c.ContainerLayer || c.Volatile || !hasNote(c, "on overlay: a container's writable layer, lost when the container is replaced, so a new container downloads again") {
		t.Errorf("overlay: %+v", c)
	}
	c = hubResult(t, Health{FS: "ext4"})
	if c.ContainerLayer || c.Volatile || len(c.Notes) != 0 {
		t.Errorf("ext4: %+v", c)
	}
}

// TestTorchHubCache: torch.hub's checkpoints land in the torch_hub
// cache, TORCH_HOME/hub first; its temporary name is not an entry.
func TestTorchHubCache(t *testing.T) {
	for _, tc := range []struct{ env, root string }{
		{"TORCH_HOME=/t", "/t/hub"},
		{"XDG_CACHE_HOME=/x", "/x/torch/hub"},
		{"", "/h/.cache/torch/hub"},
	} {
		s := newScript(t, Config{})
		s.env(91, "HOME=/h", tc.env)
		ck := tc.root + "/checkpoints"
		s.do(91, OpLookup, ck+"/resnet.pth", 0, enoent, 0)
		s.do(91, OpOpen, ck+"/tmpab12cd34", wr, 3, 0)
		s.do(91, OpRename, ck+"/tmpab12cd34", 0, 0, 0, ck+"/resnet.pth")
		c := cacheIn(t, s.result(), "torch_hub")
		if c.Root != tc.root || counts(c) != "lookups 1 hits 0 misses 1 written 1" {
			t.Errorf("%q: root %s, %s", tc.env, c.Root, counts(c))
		}
	}
}
