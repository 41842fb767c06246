package pagecache

import (
	"testing"

	bpfpc "github.com/coldtrace/coldtrace/bpf/pagecache"
	"github.com/coldtrace/coldtrace/trace/probe"
)

// TestLayout holds the Go types this package reads the kernel's data with
// to the BTF of the embedded object.
func TestLayout(t *testing.T) {
	spec, err := bpfpc.LoadPagecache()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"path_event": bpfpc.PagecachePathEvent{},
		"file_stats": bpfpc.PagecacheFileStats{},
		"file_key":   bpfpc.PagecacheFileKey{},
	} {
		if err := probe.CheckLayout(spec.Types, name, v); err != nil {
			t.Error(err)
		}
	}
}
