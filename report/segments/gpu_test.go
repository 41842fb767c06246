package segments

import (
	"strings"
	"testing"

	"github.com/coldtrace/coldtrace/attribution"
)

func gpuSegs(labels []string, alloc []uint64) []attribution.SegmentResult {
	var out []attribution.SegmentResult
	first := 1 // segment 0 is the time before the first mark
	if strings.HasPrefix(labels[0], "(") {
		first = 0
	}
	for i, l := range labels {
		out = append(out, attribution.SegmentResult{
			Segment: attribution.Segment{Index: first + i, Label: l},
			Result:  &attribution.Result{},
			GPUs:    []attribution.SegmentGPU{{Index: 0, Polls: 2, AllocatedBytes: alloc[i], VRAMPeakBytes: 5 << 30, VRAMEndBytes: 4 << 30}},
		})
	}
	return out
}

func TestAllocationSentenceGroupsRoundsThatAllocatedNone(t *testing.T) {
	for _, c := range []struct {
		labels []string
		alloc  []uint64
		want   string
	}{
		{[]string{"(before the first mark)", "round 1", "round 2", "round 3", "round 4"}, []uint64{0, 4 << 30, 0, 0, 0},
			"round 1 allocated 4.0 GiB of VRAM (peak 5.0 GiB) and kept 4.0 GiB; rounds 2–4 allocated none"},
		{[]string{"load", "prompt a", "prompt b"}, []uint64{1 << 30, 0, 0},
			"load allocated 1.0 GiB of VRAM (peak 5.0 GiB) and kept 4.0 GiB; prompt a and prompt b allocated none"},
		{[]string{"a", "b", "c", "d"}, []uint64{1 << 30, 0, 0, 0},
			"a allocated 1.0 GiB of VRAM (peak 5.0 GiB) and kept 4.0 GiB; segments 2–4 allocated none"},
		{[]string{"round 1", "round 2"}, []uint64{0, 0}, ""}, // an idle GPU: the table says enough
		{[]string{"round 1", "round 2", "round 3"}, []uint64{0, 0, 1 << 30}, "rounds 1–2 allocated none; round 3 allocated 1.0 GiB of VRAM (peak 5.0 GiB) and kept 4.0 GiB"},
		{[]string{"round 1"}, []uint64{0}, ""},
	} {
		if got := AllocationSentence(gpuSegs(c.labels, c.alloc), 0); got != c.want {
			t.Errorf("%q: got %q, want %q", c.labels, got, c.want)
		}
	}
}

func TestSegmentTextHasGPUTableOnlyWithGPUData(t *testing.T) {
	var b strings.Builder
	segs := gpuSegs([]string{"round 1", "round 2"}, []uint64{4 << 30, 0})
	segs[1].VRAMAtExit = []attribution.VRAMRelease{{Index: 0, BeforeBytes: 4 << 30, AfterBytes: 1 << 30, Released: true}}
	if err := WriteText(&b, segs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPU 0 per segment:", "GPU 0: round 1 allocated 4.0 GiB", "released at exit (4.0 GiB → 1.0 GiB): a server that keeps the model loaded would not load it again"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	segs[0].GPUs, segs[1].GPUs, segs[1].VRAMAtExit = nil, nil, nil
	if err := WriteText(&b, segs); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "GPU 0") {
		t.Errorf("GPU lines without GPU data:\n%s", b.String())
	}
}
