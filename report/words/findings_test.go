package words

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution/advice"
	"github.com/coldtrace/coldtrace/record"
)

// finding is one finding and the sentence it renders to, whole or in
// part.
type finding struct {
	name     string
	f        advice.Finding
	want     string
	contains bool
}

func checkFindings(t *testing.T, cases []finding) {
	t.Helper()
	for _, c := range cases {
		got := Finding(c.f)
		if (c.contains && !strings.Contains(got, c.want)) || (!c.contains && got != c.want) {
			t.Errorf("%s: %q\nwant %q", c.name, got, c.want)
		}
	}
}

// A silent connection says its host, length and what came after; a
// slow lookup its host and the download it delayed.
func TestNetworkFindingsSaySo(t *testing.T) {
	w := advice.SilentWaits(&record.Record{Silent: []record.SilentConnection{
		{Peer: "10.0.0.1:443", Host: "hub.example", StartNS: 2e9, LengthNS: 12e9, Received: true, Bytes: 4096},
		{Peer: "10.0.0.2:443", StartNS: 1e9, LengthNS: 11e9, Closed: true},
	}})
	dns := advice.SlowLookups(&record.Record{Downloads: []record.Download{
		{Name: "a.bin", Lookup: &record.Lookup{Host: "hub.example", StartNS: 1e8, LengthNS: 15e8}},
	}})
	checkFindings(t, []finding{
		{"silent", w[0], "waiting on hub.example for 12.0 s from +2.0 s, nothing received; then 4.0 KiB arrived", false},
		{"silent closed", w[1], "waiting on 10.0.0.2:443 for 11.0 s from +1.0 s, nothing received; closed with nothing received", false},
		{"slow dns", dns[0], "DNS took 1.5 s before the download of a.bin: resolving hub.example at +0.1 s", false},
	})
	act, ev := Step(*w[0].Action)
	if !strings.HasPrefix(act, "the connection to hub.example: set a read timeout") || ev != Finding(w[0]) {
		t.Errorf("silent step %q, evidence %q", act, ev)
	}
	act, ev = Step(*dns[0].Action)
	if !strings.HasPrefix(act, "resolving hub.example: check the resolver") || ev != Finding(dns[0]) {
		t.Errorf("dns step %q, evidence %q", act, ev)
	}
}

// Fill renders every finding of an Advice and its next steps, and
// leaves the ranking as advice made it.
func TestFillRendersFindingsAndSteps(t *testing.T) {
	r := &record.Record{Silent: []record.SilentConnection{
		{Host: "a.example", StartNS: 1e9, LengthNS: 11e9},
		{Host: "b.example", StartNS: 1e9, LengthNS: 30e9},
	}}
	a := advice.Of(r, nil)
	Fill(&a)
	if len(a.Next) != 2 || a.Next[0].SavesNS != 30e9 || !strings.Contains(a.Next[0].Action, "b.example") ||
		a.Next[0].Evidence != a.Silent[1].Sentence || a.Silent[0].Sentence == "" {
		t.Errorf("filled advice %+v", a)
	}
	traps := advice.Traps(a)
	if len(traps) != 2 || traps[0].CostNS != 30e9 || Finding(traps[0].Finding) != a.Silent[1].Sentence {
		t.Errorf("traps %+v", traps)
	}
}

// steady is n polls 100 ms apart from t, each with b bytes.
func steady(t int64, n int, b uint64) []record.DownloadSample {
	var out []record.DownloadSample
	for i := 1; i <= n; i++ {
		out = append(out, record.DownloadSample{EndNS: t + int64(i)*100e6, Bytes: b})
	}
	return out
}

// A stall says what stalled, from where, when, and the share of bytes
// that came after it; a connection's stall names the connection.
func TestStallFindingsSaySo(t *testing.T) {
	const ms = int64(1e6)
	s := steady(0, 12, 1<<20)
	s = append(s, record.DownloadSample{EndNS: 1200*ms + 8000*ms, Bytes: 1 << 20})
	s = append(s, steady(9200*ms, 7, 1<<20)...)
	whole := advice.Stalls(&record.Record{IntervalNS: 100 * ms, Downloads: []record.Download{{Name: "model.bin", Host: "hub.example",
		Peer: "10.0.0.1:443", Bytes: 20 << 20, EndNS: 10000 * ms, Samples: s}}})
	conn := whole[0]
	conn.Connection, conn.Connections, conn.Host = 2, 2, "cdn.example"
	slow := whole[0]
	slow.Slow, slow.BytesDuring = true, 3<<10
	checkFindings(t, []finding{
		{"stall", whole[0], "download of model.bin from hub.example stalled for 8.0 s at +1.1 s after 12.0 MiB; 40% of its bytes came after the stall", false},
		{"connection", conn, "connection 2 of 2 of the download of model.bin from cdn.example stalled for 8.0 s", true},
		{"trickle", slow, "slowed to under 5% of its median rate (3.0 KiB in all) for 8.0 s", true},
	})
	if act, _ := Step(*whole[0].Action); !strings.HasPrefix(act, "download of model.bin from hub.example: set a read timeout") {
		t.Errorf("stall step %q", act)
	}
}

// A cache that did not keep its entries says the failed calls, or that
// it is inferred from the entries gone, and what a rerun pays.
func TestBrokenCacheFindingsSaySo(t *testing.T) {
	seen := advice.BrokenCache{Cache: "triton", Framework: "Triton", Root: "/nfs/triton", CompileNS: 3e9, Failures: []record.CacheFailure{
		{Op: "rename", Errno: "EBUSY", Count: 12}, {Op: "unlink", Errno: "ENOENT", Count: 1}, {Op: "open", Errno: "ESTALE", Count: 2}}}
	two := seen
	two.Failures = two.Failures[:2]
	inferred := advice.BrokenCache{Cache: "python", Root: "/nfs/pyc", Inferred: true, EntriesWritten: 8, EntriesGone: 8}
	checkFindings(t, []finding{
		{"seen", two, "the Triton cache at /nfs/triton failed 12 renames (EBUSY) and 1 unlink (ENOENT): entries were compiled but not kept; a rerun compiles again (3.0 s of compiles this run) — put the cache on a local disk or give each process its own", false},
		{"three kinds", seen, "failed 12 renames (EBUSY) and 1 unlink (ENOENT) and 1 other kinds of call: ", true},
		{"inferred", inferred, "the python cache at /nfs/pyc: 8 of the 8 entries written this run were gone at the end (inferred: the failing call was not traced); a rerun compiles them again — put", true},
	})
	if act, _ := Step(advice.Action{Finding: seen}); act != "the Triton cache at /nfs/triton: put the cache on a local disk or give each process its own" {
		t.Errorf("step %q", act)
	}
}

// A file on a slow filesystem says its fills, their size and time, a
// sequential read of the same filesystem when there was one, and the
// fix; the step's evidence is the sentence up to the fix.
func TestSlowFilesystemFindingsSaySo(t *testing.T) {
	fuse := record.File{Path: "/m/w.bin", Dev: 7, FS: "fuse", BytesFromDisk: 1 << 20, PagesMissed: 256, FillWaitNS: 500e6,
		Order: &record.ReadOrder{Misses: 256, FaultPages: 256, Jumps: [5]uint64{0, 10, 100, 0, 145}}}
	seq := record.File{Path: "/m/a.bin", Dev: 7, FS: "fuse", BytesFromDisk: 4 << 20, IOWaitNS: 80e6,
		Order: &record.ReadOrder{Misses: 1024, ReadPages: 1024, Jumps: [5]uint64{1023}}}
	alone := advice.SlowFS(&record.Record{Files: []record.File{fuse}})
	quoted := advice.SlowFS(&record.Record{Files: []record.File{fuse, seq}})
	checkFindings(t, []finding{
		{"alone", alone[0], "/m/w.bin on fuse was filled by 256 faults of ~4.0 KiB at 2.0 ms each (2.1 MB/s): read it eagerly (one sequential read, vLLM: --safetensors-load-strategy eager) instead of mapping it, or copy it to local disk", false},
		{"quoted", quoted[0], "/m/w.bin on fuse was filled by 256 faults of ~4.0 KiB at 2.0 ms each (2.1 MB/s); this run read /m/a.bin on the same filesystem sequentially at 52.4 MB/s, 25× faster: read it eagerly", true},
	})
	act, ev := Step(*quoted[0].Action)
	if !strings.HasPrefix(act, "/m/w.bin: read it eagerly") || !strings.HasSuffix(ev, "25× faster") {
		t.Errorf("step %q, evidence %q", act, ev)
	}
}

// A file read again on every run says how much, how long, and why.
func TestRecurringFindingsSaySo(t *testing.T) {
	checkFindings(t, []finding{
		{"with misses", advice.RecurringRead{Path: "/m/w.bin", FS: "fuse", Bytes: 4 << 20, FillNS: 5e8, Misses: 1024},
			"/m/w.bin was read from fuse (4.0 MiB in 0.50 s, 1024 page misses at 488 µs each, 8.4 MB/s) and is read again on every run: FUSE drops its cached pages at open unless the filesystem is mounted with kernel_cache; read it eagerly once, or copy it to local disk", false},
		{"no misses", advice.RecurringRead{Path: "/m/x", FS: "fuse", Bytes: 1 << 20, FillNS: 2e9},
			"/m/x was read from fuse (1.0 MiB in 2.00 s, 0.5 MB/s) and is read again", true},
	})
}

// Compiles after ready say how many, when ready was, the segments they
// fell in and the latency they added.
func TestLateFindingsSaySo(t *testing.T) {
	l := advice.LateCompiles{ReadyNS: 2e9, ReadyBy: `mark "ready"`, Compiles: 3, CompileNS: 1.7e9, Segments: []advice.LateSegment{
		{Index: 1, Label: "ready", Compiles: 2, CompileNS: 1.5e9, Sources: []string{"triton", "libnvrtc:x"}},
		{Index: 3, Label: "req", Compiles: 1, CompileNS: 2e8, Sources: []string{"cc"}}}}
	one := advice.LateCompiles{ReadyNS: 1e9, ReadyBy: "ready", Compiles: 1, CompileNS: 1e8,
		Segments: []advice.LateSegment{{Index: 1, Label: "x", Compiles: 1, CompileNS: 1e8, Sources: []string{"cc"}}}}
	checkFindings(t, []finding{
		{"three", l, `3 compiles after ready (mark "ready", at +2.00 s): 2 during segment 1 "ready" (triton, libnvrtc:x: 1.50 s); 1 during segment 3 "req" (cc: 0.20 s) — 1.70 s of latency in live requests; warm them up before ready, or persist the cache`, false},
		{"one", one, `1 compile after ready (ready, at +1.00 s)`, true},
	})
	if act, ev := Step(advice.Action{Finding: l}); !strings.HasPrefix(act, "compile before ready") || ev != Finding(l) {
		t.Errorf("step %q, evidence %q", act, ev)
	}
}

// Compiles with no cache say the framework, the time and the calls, and
// how to turn its cache on when that is known.
func TestNoCacheFindingsSaySo(t *testing.T) {
	numba := advice.NoCacheCompile{Framework: "Numba", Source: "libllvmlite", NS: 4e7, Calls: 3, Enable: "enable cache=True"}
	checkFindings(t, []finding{
		{"numba", numba, "Numba compiled with no cache: 0.04 s in 3 calls of libllvmlite; enable cache=True", false},
		{"nvrtc", advice.NoCacheCompile{Framework: "NVRTC", Source: "libnvrtc", NS: 5e7, Calls: 1}, "NVRTC compiled with no cache: 0.05 s in 1 calls of libnvrtc", false},
		{"subprocess", advice.NoCacheCompile{Source: "cc, ptxas", NS: 1.2e9, Calls: 4, Subprocess: true},
			"compiled with no cache: 1.20 s in 4 runs of cc, ptxas, with no lookup in any known cache", false},
	})
	if act, ev := Step(advice.Action{Finding: numba}); act != "enable cache=True" || ev != Finding(numba) {
		t.Errorf("step %q, evidence %q", act, ev)
	}
}

// A directory that may be a cache says what the run created there, and,
// read back by a second run, how to keep it.
func TestCandidateFindingsSaySo(t *testing.T) {
	one := advice.CacheCandidate{Dir: "/home/u/.cache/tool", CreatedBytes: 2 << 20, Files: 1}
	reused := advice.CacheCandidate{Dir: "/home/u/my tool", CreatedBytes: 3 << 20, Files: 2, Reused: true}
	checkFindings(t, []finding{
		{"one", one, "/home/u/.cache/tool may be a cache: this run created 2.0 MiB in 1 file there", false},
		{"reused", reused, "'/home/u/my tool' may be a cache the registry does not know: run A created 3.0 MiB in 2 files there and run B read them without rewriting; keep it between runs (or add it with --cache-dir NAME='/home/u/my tool')", false},
	})
	if act, ev := Step(one.Action()); act != "keep /home/u/.cache/tool between runs" || ev != Finding(one) {
		t.Errorf("step %q, evidence %q", act, ev)
	}
}

// A file read says its misses, their order and rate, its filesystem,
// and, read out of order far below the device's sequential rate, the fix.
func TestReadFindingsSaySo(t *testing.T) {
	seq := record.File{Path: "/d/seq", Dev: 8, BytesFromDisk: 256 << 20, IOWaitNS: 1e9,
		Order: &record.ReadOrder{Misses: 1000, ReadPages: 65536, Jumps: [5]uint64{990, 9}}}
	rnd := record.File{Path: "/d/model.gguf", Dev: 8, BytesFromDisk: 64 << 20, IOWaitNS: 4e9,
		Order: &record.ReadOrder{Misses: 16384, FaultPages: 16384, Jumps: [5]uint64{10, 100, 8000, 4000, 4273}, FS: "nfs4"}}
	alone := advice.Reads(&record.Record{Files: []record.File{rnd}}, nil)
	both := advice.Reads(&record.Record{Files: []record.File{seq, rnd}}, nil)
	var slow advice.FileRead
	for _, f := range both {
		if f.Unordered {
			slow = f
		}
	}
	checkFindings(t, []finding{
		{"alone", alone[0], "model.gguf was read by 16 k random misses (page faults) at 16.78 MB/s, 244 µs per miss, on nfs4 (a network filesystem)", false},
		{"sequential", both[1], "seq was read by 1000 sequential misses (read) at 268.44 MB/s, 1.0 ms per miss", true},
		{"slow", slow, "model.gguf was read by 16 k random page faults at 16.78 MB/s (244 µs per miss); read sequentially it ran at 268 MB/s: pre-read it (`coldtrace prefetch`) or disable mmap", false},
	})
	if act, ev := Step(*slow.Action); act != "/d/model.gguf: pre-read it (`coldtrace prefetch`) or disable mmap" || ev != Finding(slow) {
		t.Errorf("step %q, evidence %q", act, ev)
	}
}

// A cache to persist says where it is, why it does not survive and what
// a run without it pays; its step the export line when there is one.
func TestPersistFindingsSaySo(t *testing.T) {
	p := advice.Persist{Cache: "triton", Framework: "Triton", Root: "/tmp/triton", SizeBytes: 1 << 20, FS: "tmpfs", Survival: "lost at reboot",
		RerunNS: 2e9, Export: `export TRITON_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}"/'triton'`}
	checkFindings(t, []finding{{"persist", p, "/tmp/triton (1.0 MiB) is on tmpfs, lost at reboot; this run compiled into it for 2.00 s", false}})
	if act, _ := Step(advice.Action{Finding: p}); act != "persist the Triton cache: "+p.Export {
		t.Errorf("step %q", act)
	}
	p.Export, p.Framework = "", ""
	if act, _ := Step(advice.Action{Finding: p}); act != "persist the triton cache: move it to a persistent directory" {
		t.Errorf("step %q", act)
	}
}

// A cache whose lookups all missed says why: a moved root (and how to
// point it back), a changed key (and what the key includes), or empty.
func TestMissFindingsSaySo(t *testing.T) {
	moved := advice.CacheMiss{Cache: "numba", Framework: "Numba", Root: "/b", Reason: advice.MovedRoot, Lookups: 1, Via: "NUMBA_CACHE_DIR",
		EntriesAt: []advice.EntriesAt{{Path: "/a", Files: 2, Bytes: 100, From: "baseline record"}}, ExportVar: "NUMBA_CACHE_DIR", ExportValue: "/a b"}
	stale := advice.CacheMiss{Cache: "numba", Framework: "Numba", Root: "/c", Reason: advice.KeyChanged, Lookups: 3, Stale: 1, KeyIncludes: "the moon's phase"}
	present := advice.CacheMiss{Cache: "pyc", Root: "/c", Reason: advice.KeyChanged, Lookups: 3, Present: 2048, KeyIncludes: "k"}
	checkFindings(t, []finding{
		{"moved", moved, "Numba cache: a different root: this run looked in /b (NUMBA_CACHE_DIR made it) and its 1 lookups missed, while /a holds 2 entries written, 100 B (baseline record): HOME, XDG_CACHE_HOME or a variable moved the cache — not a cold cache", false},
		{"stale", stale, "Numba cache: the same root, every lookup missed: /c held an entry this run found and could not use; the 3 lookups of this run matched none: its key changed — Numba's key includes the moon's phase; one of them differs from the run that wrote the entries", false},
		{"present", present, "pyc cache: the same root, every lookup missed: /c holds 2.0 KiB this run did not write;", true},
		{"cold", advice.CacheMiss{Cache: "numba", Root: "/d", Reason: advice.Cold}, "numba cache /d was empty: a first run", false},
	})
	if act, _ := Step(advice.Action{Finding: moved}); act != "point the Numba cache back at its entries: export NUMBA_CACHE_DIR='/a b'" {
		t.Errorf("moved step %q", act)
	}
	if act, _ := Step(advice.Action{Finding: stale}); act != "keep the Numba cache key stable between runs (it includes the moon's phase)" {
		t.Errorf("stale step %q", act)
	}
}

// A cache change between two runs says what moved or changed.
func TestCacheChangeFindingsSaySo(t *testing.T) {
	root := advice.CacheChange{Cache: "numba", Framework: "Numba", Reason: advice.MovedRoot, RootA: "/a", RootB: "/b", ViaB: "NUMBA_CACHE_DIR", WrittenA: 4, MissesB: 5}
	sameVia := root
	sameVia.ViaA = "NUMBA_CACHE_DIR"
	checkFindings(t, []finding{
		{"root", root, "Numba: the root moved (A's root came from the default (HOME), B's from NUMBA_CACHE_DIR): A wrote 4 entries in /a, B looked in /b and missed 5 — not a cold cache", false},
		{"same via", sameVia, "Numba: the root moved (NUMBA_CACHE_DIR changed):", true},
		{"stale", advice.CacheChange{Cache: "triton", RootA: "/t", RootB: "/t", Stale: 2, KeyIncludes: "k"}, "triton: B found 2 of the entries A wrote and they did not match: the key changed — k", false},
		{"moved dir", advice.CacheChange{Cache: "pyc", RootA: "/p", RootB: "/p", MovedDir: 3, Unused: 4}, "pyc: B missed 3 entries under names A wrote in another directory (4 of A's entries unused):", true},
		{"foreign", advice.CacheChange{Cache: "pyc", RootA: "/p", RootB: "/p", Unused: 4, Foreign: 5, KeyIncludes: "k"}, "pyc: A wrote 4 entries B never looked up, and B missed under 5 names A never wrote: the key changed — k", false},
	})
}
