package text

import (
	"errors"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/internal/fixtures"
	"github.com/coldtrace/coldtrace/record"
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
