package report

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

func TestTextShowsLedgerGPUAndFiles(t *testing.T) {
	r, err := record.ReadFile(filepath.Join("..", "testdata", "records", "cold-ml.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteText(&b, r, nil, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"disk reads", "JIT compile", "GPU compute", "other wait", "verdict: cold start",
		"GPU 0", "VRAM", "peak", "qwen_image_fp8.safetensors"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestDurationAndBytes(t *testing.T) {
	for ns, want := range map[int64]string{0: "0s", 340e6: "340ms", 8.21e9: "8.21s", 3672e9: "1h01m12s", 612e9: "10m12s"} {
		if got := Duration(ns); got != want {
			t.Errorf("Duration(%d) = %q, want %q", ns, got, want)
		}
	}
	for n, want := range map[uint64]string{512: "512 B", 1536: "1.5 KiB", 14 << 30: "14.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
