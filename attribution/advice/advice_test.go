package advice

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func numbaCache(root string, keys []string) record.Cache {
	return record.Cache{Name: "numba", Framework: "Numba", Root: root, Via: "NUMBA_CACHE_DIR", MovedBy: "NUMBA_CACHE_DIR",
		Lookups: 1, Misses: 2, EntriesWritten: 2, BytesWritten: 100, SizeBytes: 100, CompileNS: 40e6,
		MissedKeys: keys, WrittenKeys: keys, FS: "ext4", Survival: "persistent"}
}

func TestStaleEntriesAreAKeyChange(t *testing.T) {
	c := numbaCache("/c", []string{"d_1/p.f-2.nbi"})
	c.EntriesStale, c.StaleKeys = 1, []string{"d_1/p.f-2.nbi"}
	r := &record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}}
	m := Misses(r)
	if len(m) != 1 || m[0].Reason != KeyChanged || m[0].Stale != 1 || m[0].KeyIncludes == "" {
		t.Fatalf("misses = %+v", m)
	}
	a := Of(r, nil)
	if len(a.Next) != 1 || a.Next[0].SavesNS != 40e6 {
		t.Fatalf("next = %+v", a.Next)
	}
	cold := numbaCache("/c", []string{"d_1/p.f-2.nbi"})
	if m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{cold}}}); len(m) != 1 || m[0].Reason != Cold {
		t.Fatalf("cold misses = %+v", m)
	}
}

func TestCompare(t *testing.T) {
	a := &record.Record{JIT: &record.JIT{Caches: []record.Cache{numbaCache("/c", []string{"d_1/p.f-2.nbi"})}}}
	stale := numbaCache("/c", []string{"d_1/p.f-2.nbi"})
	stale.StaleKeys = []string{"d_1/p.f-2.nbi"}
	moved := numbaCache("/c", []string{"e_2/p.f-2.nbi"})
	other := numbaCache("/elsewhere", []string{"d_1/p.f-2.nbi"})
	other.Via = "default"
	for _, tc := range []struct {
		b    record.Cache
		want string
	}{{stale, KeyChanged}, {moved, MovedRoot}, {other, MovedRoot}} {
		ch := Compare(a, &record.Record{JIT: &record.JIT{Caches: []record.Cache{tc.b}}})
		if len(ch) != 1 || ch[0].Reason != tc.want {
			t.Errorf("b=%s %v: changes %+v, want %s", tc.b.Root, tc.b.MissedKeys, ch, tc.want)
		}
	}
	// B missed under the very names A wrote (A's entries were gone):
	// not a key change or a moved root.
	if ch := Compare(a, a); len(ch) != 0 {
		t.Errorf("A vs A: %+v", ch)
	}
}

func TestPersistOnTmpfs(t *testing.T) {
	c := numbaCache("/mnt/it's", nil)
	c.FS, c.Survival = "tmpfs", "lost at reboot"
	p := PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(p) != 1 || p[0].Survives() || p[0].Action == nil {
		t.Fatalf("persist = %+v", p)
	}
	if got := Exports(p); len(got) != 1 || got[0] != `export NUMBA_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}"/'numba'` {
		t.Fatalf("exports = %q", got)
	}
	c.Survival = "persistent"
	if got := Exports(PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})); got[0] != `export NUMBA_CACHE_DIR='/mnt/it'\''s'` {
		t.Fatalf("exports = %q", got)
	}
}

func TestRandomFaultsGetPreReadAdvice(t *testing.T) {
	seq := record.File{Path: "/d/seq", Dev: 8, BytesFromDisk: 256 << 20, IOWaitNS: 300e6,
		Order: &record.ReadOrder{Misses: 1000, ReadPages: 65536, Jumps: [5]uint64{990, 9}}}
	rnd := record.File{Path: "/d/model.gguf", Dev: 8, BytesFromDisk: 64 << 20, IOWaitNS: 4e9,
		Order: &record.ReadOrder{Misses: 16384, FaultPages: 16384, Jumps: [5]uint64{10, 100, 8000, 4000, 4273}}}
	r := &record.Record{Files: []record.File{seq, rnd}}
	reads := Reads(r, nil)
	if len(reads) != 2 {
		t.Fatalf("reads = %+v", reads)
	}
	for _, fr := range reads {
		switch fr.Path {
		case "/d/seq":
			if fr.Order != "sequential" || fr.Action != nil {
				t.Errorf("seq: %+v", fr)
			}
		case "/d/model.gguf":
			if fr.Order != "random" || fr.Action == nil || !fr.Unordered || fr.FaultBytes <= fr.ReadBytes {
				t.Errorf("random: %+v", fr)
			}
			if fr.FaultBytes != 16384*4096 || fr.MissNS != int64(4e9)/16384 {
				t.Errorf("random: %+v", fr)
			}
		}
	}
	// Without a sequential read on the device: the rate alone, no advice.
	if got := Reads(&record.Record{Files: []record.File{rnd}}, nil); len(got) != 1 || got[0].Action != nil || got[0].BaselineMBps != 0 {
		t.Errorf("no baseline: %+v", got)
	}
	// The baseline record supplies the device's rate.
	if got := Reads(&record.Record{Files: []record.File{rnd}}, &record.Record{Files: []record.File{seq}}); got[0].Action == nil {
		t.Errorf("baseline record: %+v", got)
	}
}

func TestNoCacheNumba(t *testing.T) {
	r := &record.Record{JIT: &record.JIT{Windows: []record.JITWindow{
		{PID: 1, StartNS: 0, EndNS: 30e6, Kind: "uprobe", Source: "libllvmlite:LLVMPY_FinalizeObject"},
		{PID: 1, StartNS: 40e6, EndNS: 50e6, Kind: "uprobe", Source: "libllvmlite:LLVMPY_RunPassManager"},
	}}}
	n := NoCache(r)
	if len(n) != 1 || n[0].NS != 40e6 || n[0].Framework != "Numba" || n[0].Action == nil || n[0].Enable == "" {
		t.Fatalf("no cache = %+v", n)
	}
	// Inside a cache miss's window it is the cache's compile, not one without a cache.
	r.JIT.Windows = append(r.JIT.Windows, record.JITWindow{PID: 1, StartNS: 0, EndNS: 60e6, Kind: "in_process", Source: "numba"})
	if n := NoCache(r); len(n) != 0 {
		t.Fatalf("cached: %+v", n)
	}
}

func TestNoCacheNVRTCHasNoAction(t *testing.T) {
	r := &record.Record{JIT: &record.JIT{Windows: []record.JITWindow{
		{PID: 1, StartNS: 0, EndNS: 50e6, Kind: "uprobe", Source: "libnvrtc:nvrtcCompileProgram"},
		{PID: 1, StartNS: 60e6, EndNS: 90e6, Kind: "uprobe", Source: "libnvrtc:nvrtcCompileProgram"},
		{PID: 1, StartNS: 55e6, EndNS: 95e6, Kind: "in_process", Source: "torch-kernels"},
	}}}
	n := NoCache(r)
	if len(n) != 1 || n[0].NS != 50e6 || n[0].Action != nil || n[0].Framework != "NVRTC" {
		t.Fatalf("nvrtc: %+v", n)
	}
}

func TestMissesWithEntriesElsewhereAreAMovedRoot(t *testing.T) {
	c := numbaCache("/new", []string{"d_1/p.f-2.nbi"})
	c.OtherRoots = []record.OtherRoot{{Path: "/home/u/.cache/numba", Files: 12, SizeBytes: 4096}}
	m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(m) != 1 || m[0].Reason != MovedRoot || m[0].Action == nil || m[0].ExportVar != "NUMBA_CACHE_DIR" || m[0].ExportValue != "/home/u/.cache/numba" {
		t.Fatalf("misses = %+v", m)
	}
}

func TestInTreeCacheGetsNoExport(t *testing.T) {
	c := numbaCache("**/__pycache__", nil)
	c.Via, c.Survival, c.FS = "in-tree", "", ""
	p := PersistList(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}})
	if len(p) != 1 || p[0].Export != "" || len(Exports(p)) != 0 || p[0].Action != nil {
		t.Fatalf("in-tree: %+v", p)
	}
}

// TestMissesWithNoLookupSayNothingOfTheKey: a cache that held entries
// and whose only misses this run were writes, no lookup seen (pip
// refreshes an index page it always revalidates; its wheel's hit is a
// small file's, unseen without the path syscalls), says nothing of a
// changed key; with a lookup that missed, it does.
func TestMissesWithNoLookupSayNothingOfTheKey(t *testing.T) {
	c := record.Cache{Name: "pip", Framework: "pip packages (weights)", Root: "/h/.cache/pip", Misses: 1, EntriesWritten: 1,
		BytesWritten: 377, SizeBytes: 90 << 10}
	if m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}}); len(m) != 0 {
		t.Errorf("no lookup seen: %+v, want nothing said", m)
	}
	c.Lookups = 1
	if m := Misses(&record.Record{JIT: &record.JIT{Caches: []record.Cache{c}}}); len(m) != 1 || m[0].Reason != KeyChanged {
		t.Errorf("a lookup that missed: %+v, want %s", m, KeyChanged)
	}
}
