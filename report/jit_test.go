package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func jitRecord() *record.Record {
	return &record.Record{JIT: &record.JIT{
		Caches: []record.Cache{
			{Name: "triton", Root: "/home/u/.triton/cache", Lookups: 3, Hits: 1, Misses: 2, EntriesWritten: 2,
				BytesWritten: 27043, CompileNS: 823e6, FS: "tmpfs", Volatile: true, SizeBytes: 54086, Files: 6},
			{Name: "cuda", Root: "/home/u/.nv/ComputeCache", Disabled: "CUDA_CACHE_DISABLE=1",
				Notes: []string{"CUDA_CACHE_DISABLE=1: the driver cache is off"}},
			{Name: "python", Root: "**/__pycache__", Lookups: 50, Hits: 50},
		},
		Compilers: []record.Compiler{{Name: "cc", Runs: 1, WallNS: 822e6, CPUNS: 3e6}, {Name: "cc1", Runs: 1, WallNS: 801e6, CPUNS: 801e6}},
		Uprobes:   []record.JITUprobe{{Name: "libnvrtc:nvrtcCompileProgram", Calls: 3, TotalNS: 300e6, CPUNS: 299e6}},
	}}
}

func TestWriteJITText(t *testing.T) {
	var b strings.Builder
	if err := WriteJITText(&b, jitRecord()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"JIT and kernel caches", "triton", "/home/u/.triton/cache", "26.4 KiB", "823ms",
		"(every __pycache__ directory)", "on tmpfs (emptied on reboot", "CUDA_CACHE_DISABLE=1: the driver cache is off",
		"cc1", "801ms", "uprobe libnvrtc:nvrtcCompileProgram: 3 calls, 300ms",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	b.Reset()
	if err := WriteJITText(&b, &record.Record{}); err != nil || b.Len() != 0 {
		t.Errorf("no JIT: wrote %q, %v", b.String(), err)
	}
}

func TestSummaryJIT(t *testing.T) {
	b, _ := json.Marshal(map[string]any{"caches": SummaryCaches(jitRecord()), "compilers": SummaryCompilers(jitRecord())})
	var back struct {
		Caches    []map[string]any `json:"caches"`
		Compilers []map[string]any `json:"compilers"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "root", "lookups", "hits", "misses", "entries_written", "bytes_written", "compile_ns"} {
		if _, ok := back.Caches[0][k]; !ok {
			t.Errorf("caches[0] lacks %q", k)
		}
	}
	if len(back.Caches[0]) != 8 {
		t.Errorf("caches[0] keys %v", back.Caches[0])
	}
	for _, k := range []string{"name", "runs", "wall_ns", "cpu_ns"} {
		if _, ok := back.Compilers[0][k]; !ok {
			t.Errorf("compilers[0] lacks %q", k)
		}
	}
	if s := SummaryCaches(&record.Record{}); s == nil || len(s) != 0 {
		t.Errorf("empty caches %v", s)
	}
}
