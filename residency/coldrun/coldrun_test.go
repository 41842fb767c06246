package coldrun

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coldtrace/coldtrace/internal/actor"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/registry"
	"github.com/coldtrace/coldtrace/residency/kcache"
)

// A record's fresh caches and its rows that are no file are nothing a
// cold run could evict.
func TestFilesFromDiskLeaveOutFreshCachesAndMetadata(t *testing.T) {
	m := &record.MadeCold{CacheDirs: []record.ColdCacheDir{{Cache: "triton", Env: "TRITON_CACHE_DIR", Dir: "/var/tmp/coldtrace-cold-1/triton"}}}
	for path, want := range map[string]bool{
		"/var/tmp/coldtrace-cold-1/triton":        true,
		"/var/tmp/coldtrace-cold-1/triton/K/k.so": true,
		"/var/tmp/coldtrace-cold-1/triton2/k.so":  false,
		"/home/u/.triton/cache/K/k.so":            false,
	} {
		if got := InFreshCaches(m, path); got != want {
			t.Errorf("InFreshCaches(%s) = %v", path, got)
		}
	}
	if InFreshCaches(nil, "/x") {
		t.Error("a record not made cold has fresh caches")
	}
	r := &record.Record{MadeCold: m, Files: []record.File{
		{ID: 0, Path: "/var/tmp/coldtrace-cold-1/triton/K/k.so", PagesMissed: 3},
		{ID: 1, Path: "/data/model.bin", PagesMissed: 9},
		{ID: 2, Path: "[filesystem metadata of 254:0, mounted on /]", PagesMissed: 2},
	}}
	if got := FilesFromDisk(r); len(got) != 1 || got[0].Path != "/data/model.bin" {
		t.Errorf("files read from disk %+v: want the model only (no fresh cache, no metadata row)", got)
	}
}

// A cold run of the jit class points every JIT cache the registry can
// move at an empty directory the command's user owns under Base, sets
// the variables in the command's environment, and removes it all after.
func TestMakeGivesFreshCachesAndRemovesThem(t *testing.T) {
	a, err := actor.Resolve("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	r, err := Make(Options{Classes: []kcache.Class{kcache.JIT}, Owner: a.CommandActor(), Environ: []string{"HOME=/nonexistent", "TRITON_CACHE_DIR=/mine"}})
	if err != nil {
		t.Fatal(err)
	}
	root := r.Root()
	if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() && !strings.HasPrefix(root, "/var/tmp/") {
		t.Errorf("fresh caches in %s, want them on disk under /var/tmp", root)
	}
	if root == "" || filepath.Dir(root) != Base() || len(r.Made.CacheDirs) == 0 {
		t.Fatalf("root %q under %s, caches %+v", root, Base(), r.Made.CacheDirs)
	}
	env := registry.ParseEnvList(r.Environ())
	for _, d := range r.Made.CacheDirs {
		fi, err := os.Stat(d.Dir)
		if err != nil || !fi.IsDir() || int(fi.Sys().(*syscall.Stat_t).Uid) != int(a.Command.UID) {
			t.Errorf("%s: %v, want a directory of uid %d", d.Dir, err, a.Command.UID)
		}
		if env[d.Env] != d.Dir {
			t.Errorf("the command's %s is %q, want %s", d.Env, env[d.Env], d.Dir)
		}
	}
	if env["TRITON_CACHE_DIR"] == "/mine" || len(r.Overrides()) != len(r.Made.CacheDirs) {
		t.Errorf("TRITON_CACHE_DIR %q, overrides %q", env["TRITON_CACHE_DIR"], r.Overrides())
	}
	if !strings.HasPrefix(r.Describe(), "cold run (jit): ") {
		t.Errorf("describe: %q", r.Describe())
	}
	var b strings.Builder
	r.Cleanup(&b)
	if _, err := os.Stat(root); !os.IsNotExist(err) || b.Len() > 0 || r.Made.KeptDirs {
		t.Errorf("after cleanup: %v, %q, kept %v", err, b.String(), r.Made.KeptDirs)
	}
}

// The files read from disk come in the order the run first touched them
// (their first sample), then those no sample names; files only hit are
// left out.
func TestFilesFromDiskInFirstTouchOrder(t *testing.T) {
	r := &record.Record{
		Files: []record.File{
			{ID: 0, Path: "/never-in-samples", PagesMissed: 1},
			{ID: 1, Path: "/second", PagesMissed: 5},
			{ID: 2, Path: "/hit-only", PagesAccessed: 9},
			{ID: 3, Path: "/first", BytesFromDisk: 4096},
		},
		Samples: []record.Sample{
			{EndNS: 1, Files: []record.FileDelta{{File: 3, PagesAccessed: 1}}},
			{EndNS: 2, Files: []record.FileDelta{{File: 2, PagesAccessed: 1}, {File: 1, PagesMissed: 5}}},
		},
	}
	var got []string
	for _, f := range FilesFromDisk(r) {
		got = append(got, f.Path)
	}
	if strings.Join(got, " ") != "/first /second /never-in-samples" {
		t.Errorf("order %v", got)
	}
}
