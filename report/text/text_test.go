package text

import (
	"errors"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
)

func TestTextShowsLedgerGPUAndFiles(t *testing.T) {
	r := fixtures.Record(t, "cold-ml")
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"disk reads", "JIT compile", "GPU compute", "other wait", "verdict: cold start",
		"GPU 0", "VRAM", "peak", "qwen_image_fp8.safetensors",
		// The downloads row and block: name, bytes, rate, peer, next run.
		"300.0 MiB received in 1 download", "…/diffusion_pytorch_model.safetensors     300.0 MiB  629 MB/s",
		"…/hub/models--Qwen--Qwen-Image/blobs/3f2a    huggingface.co          300.0 MiB  629 MB/s     500ms  kept (huggingface cache)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// TestTextOneDurationFormat: the header and the verdict write the same
// duration the same way (they once said "8.21s" and "8.2s").
func TestTextOneDurationFormat(t *testing.T) {
	r := fixtures.Record(t, "truth-warm")
	r.WallNS = 8_210_000_000
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "— 8.2s wall") || strings.Contains(out, "8.21s") {
		t.Errorf("header duration:\n%s", out)
	}
}

// TestTextEscapesProgramStrings: names chosen by the traced program cannot
// reach the terminal raw.
func TestTextEscapesProgramStrings(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	evil := "/tmp/\x1b[31mred\nfake: line\xff.bin"
	r.Files[0].Path = evil
	r.Command = []string{"sh", "-c", "echo \x1b]0;title\x07"}
	r.Processes[0].Comm = "x\x1b[2J"
	r.Warnings = append(r.Warnings, "cannot read "+evil)
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r") || strings.Contains(out, "\nfake: line") || strings.Contains(out, "\xff") {
		t.Errorf("raw program strings in the summary:\n%q", out)
	}
	for _, want := range []string{`\x1b[31mred\nfake: line\xff.bin`, `echo \x1b]0;title\x07`, `x\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks the escaped %s:\n%s", want, out)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestTextWriteError(t *testing.T) {
	err := Write(failingWriter{}, fixtures.Record(t, "truth-warm"), nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("error = %v", err)
	}
}

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
	out := jitSection(jitRecord())
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
	if s := jitSection(&record.Record{}); s != "" {
		t.Errorf("no JIT: wrote %q", s)
	}
}

// TestTextPartial: a checkpoint says so in its first lines and claims no
// exit code.
func TestTextPartial(t *testing.T) {
	r := fixtures.Record(t, "cold-ml")
	r.Partial = &record.Partial{AtNS: 5e9, Reason: "checkpoint every 1s"}
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	head := strings.Join(strings.SplitN(b.String(), "\n", 3)[:2], "\n")
	if !strings.Contains(head, "PARTIAL record: written at +5.0s") || !strings.Contains(head, "checkpoint every 1s") ||
		!strings.Contains(head, "exit status unknown") || strings.Contains(head, "exit 0") {
		t.Errorf("head of a partial record's summary:\n%s", head)
	}
}

// TestTextCoarsened: a long run's coarsened timeline is said under the
// header, and a run without one says nothing of it.
func TestTextCoarsened(t *testing.T) {
	r := fixtures.Record(t, "cold-ml")
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "coarsened") {
		t.Errorf("a run with a fine timeline says it was coarsened:\n%s", b.String())
	}
	r.Coarsened = &record.Coarsening{FromNS: 1800e9, PollsPerSample: 8, Polls: 36001}
	b.Reset()
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	want := "timeline coarsened from +30m00s: each sample there sums 8 polls (36001 polls in all); totals are exact"
	if !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
}

// TestTextSaysMadeCold: a run made cold on purpose says so under its
// header, escaped (the classes come from the record).
func TestTextSaysMadeCold(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "made cold") {
		t.Errorf("a plain run says made cold:\n%s", b.String())
	}
	r.MadeCold = &record.MadeCold{Classes: []string{"page-cache", "jit\x1b[2J"}, EvictedFiles: 1, EvictedBytes: 1 << 20,
		CacheDirs: []record.ColdCacheDir{{Cache: "triton", Env: "TRITON_CACHE_DIR", Dir: "/var/tmp/coldtrace-cold-1/triton"}}}
	b.Reset()
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 2 || !strings.Contains(lines[1], "made cold on purpose (--cold=page-cache,jit") ||
		!strings.Contains(lines[1], "1 file evicted, 1.0 MiB dropped") || strings.Contains(b.String(), "\x1b") {
		t.Errorf("made-cold line:\n%s", b.String())
	}
}

// TestTextNoGPUSaidOnce: a run without a GPU says so in the table only,
// not again as a note.
func TestTextNoGPUSaidOnce(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	r.GPU = &record.GPU{Unavailable: "no NVIDIA GPU (libnvidia-ml.so.1 not found)"}
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "no NVIDIA GPU"); n != 1 {
		t.Errorf("said %d times:\n%s", n, b.String())
	}
}

// TestTextFileRowSaysWhoEvicted: the file row names who evicted its pages
// and who else read it from disk; the process table has run-queue wait.
func TestTextFileRowSaysWhoEvicted(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	r.Files[0].PagesEvicted = 1024
	r.Files[0].Evictors = []record.Evictor{{Kind: record.EvictSyscall, PID: 4242, Comm: "evictor", Syscall: "fadvise64", Pages: 1024}}
	r.Files[0].Inserters = []record.Inserter{{PID: 4121, Comm: "cat", Pages: 512}}
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"evicted during the run: 4.0 MiB by pid 4242 (evictor, not traced, fadvise64)",
		"2.0 MiB read from disk by pid 4121 (cat, not traced)", "run queue"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}

// TestTextMachineSection: memory at the start and the end, the run's
// memory cgroups with their limits, and the other processes' CPU.
func TestTextMachineSection(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	r.Machine = &record.Machine{MemStart: record.MemInfo{TotalBytes: 8 << 30, AvailableBytes: 6 << 30, CachedBytes: 1 << 30},
		MemEnd:  record.MemInfo{TotalBytes: 8 << 30, AvailableBytes: 5 << 30, CachedBytes: 2 << 30},
		Cgroups: []record.Cgroup{{Version: 1, Path: "/thrash", LimitBytes: 256 << 20, PIDs: []int32{1, 2}}},
		Others:  []record.OtherCPU{{Comm: "sh", Processes: 2, CPUNS: 1.9e9}}, OthersCPUNS: 1.9e9, OthersCount: 2, StealNS: 30e6}
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"available 6.0 GiB at the start, 5.0 GiB at the end",
		"memory cgroup (v1) /thrash: limit 256.0 MiB, 2 traced processes",
		"other processes: 2 used 1.9s of CPU during the run (sh 1.9s); steal 30ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}

// TestHubHealthText: the hub cache's network switches and a container
// layer are said in its health line.
func TestHubHealthText(t *testing.T) {
	r := &record.Record{JIT: &record.JIT{Caches: []record.Cache{
		{Name: "huggingface", Root: "/data/hf/hub", Lookups: 2, Hits: 2, FS: "overlay", ContainerLayer: true,
			Offline: "HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1"},
	}}}
	out := jitSection(r)
	t.Log("\n" + out)
	for _, want := range []string{
		"on overlay (a container's writable layer: a new container starts cold)",
		"HF_HUB_OFFLINE=1: offline, a rerun cannot download: a file missing from the cache fails the run",
		"TRANSFORMERS_OFFLINE=1: offline, a rerun cannot download",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if strings.Contains(out, "disabled by") {
		t.Error("an offline hub is not a disabled cache")
	}
}

// TestTextDiskRowCountsDirectReads: direct reads came from disk, past the
// page cache: the disk row says how much, not "0 B read from disk".
func TestTextDiskRowCountsDirectReads(t *testing.T) {
	r := fixtures.Record(t, "truth-cold")
	for i := range r.Files {
		r.Files[i].BytesFromDisk, r.Files[i].PagesMissed = 0, 0
	}
	r.Files[0].DirectBytes = 64 << 20
	var b strings.Builder
	if err := Write(&b, r, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "0 B read from disk through the page cache, 64.0 MiB direct") {
		t.Errorf("disk row:\n%s", b.String())
	}
}
