package coldrun

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
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
