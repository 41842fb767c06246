package attribution_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/words"
)

// TestVerdictWords: each analyze case's verdict and notes, said by
// report/words, contain the sentences the case states.
func TestVerdictWords(t *testing.T) {
	cases := attribution.WordedCases()
	if len(cases) < 10 {
		t.Fatalf("only %d cases state words", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			res := attribution.Analyze(tc.Record(t))
			v := words.Verdict(res.Verdict)
			for _, want := range tc.Verdict {
				if !strings.Contains(v, want) {
					t.Errorf("verdict %q does not contain %q", v, want)
				}
			}
			notes := strings.Join(words.Notes(res.Notes), "\n")
			for _, want := range tc.Notes {
				if !strings.Contains(notes, want) {
					t.Errorf("notes %q do not contain %q", notes, want)
				}
			}
		})
	}
}

// TestGoldenVerdictWords: the recorded fixtures' verdicts read, word for
// word, as they did when the verdict was a string of the result.
func TestGoldenVerdictWords(t *testing.T) {
	want := map[string]string{
		"cat-cold":        "cold start: 88% disk reads (/tmp/ctrec/big.bin not in page cache); a warm rerun should take ~11ms.",
		"cat-shared":      "cold start: 88% disk reads (/tmp/ctrec/big.bin not in page cache); a warm rerun should take ~11ms.",
		"cat-thrash":      "thrashing: /tmp/ctrec/big.bin (64.0 MiB) was read from disk 3.0× (192.0 MiB) because the run's memory cgroup limit (32.0 MiB) is below the data it reads; a rerun will read it again and will not be faster (~60ms). Raise the limit above ~76.8 MiB, or read the file once. The run waited 6ms for a CPU: 2 other processes (sh) used 160ms of CPU during it.",
		"cold-ml":         "cold start: 30% disk reads (/home/dev/models/qwen_image_fp8.safetensors not in page cache), 24% JIT compile (ptxas, triton), 8% downloads (transformer/diffusion_pytorch_model.safetensors, 300.0 MiB from huggingface.co at 629 MB/s, into the huggingface cache: kept for the next run); a warm rerun should take ~2.3s.",
		"reader-spinner":  "cold start: 90% disk reads (models/qwen_image_fp8.safetensors and 1 other file not in page cache); a warm rerun should take ~1.0s.",
		"sleep-read-spin": "cold start: 13% disk reads (data/big.bin not in page cache); a warm rerun should take ~3.0s.",
		"truth-cold":      "cold start: 33% disk reads (/home/dev/truth/data/model.bin not in page cache), 26% JIT compile (ptxas); a warm rerun should take ~2.3s.",
		"truth-warm":      "warm run: 55% CPU, 45% other wait (sleep, locks, idle); nothing came from disk, a compiler or the network, so a rerun should take about as long.",
	}
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "records", "*.json"))
	if err != nil || len(paths) != len(want) {
		t.Fatalf("fixtures %v (%v), want %d", paths, err, len(want))
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		r, err := record.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := words.Verdict(attribution.Analyze(r).Verdict); got != want[name] {
			t.Errorf("%s: verdict\n%q, want\n%q", name, got, want[name])
		}
	}
	// The notes of sleep-read-spin, word for word, from its golden file's
	// data.
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "sleep-read-spin.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res attribution.Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if got := words.Notes(res.Notes); len(got) != 1 || got[0] != "the last 30ms after the final sample were not observed and count as other wait" {
		t.Errorf("sleep-read-spin notes = %q", got)
	}
}
