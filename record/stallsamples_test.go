package record

import "testing"

func TestCoarsenSamplesKeepsBytesAndTheLastEnd(t *testing.T) {
	var s []DownloadSample
	var total uint64
	for i := int64(1); i <= 5000; i++ {
		s = append(s, DownloadSample{EndNS: i * 100, Bytes: uint64(i)})
		total += uint64(i)
	}
	got := CoarsenSamples(s, MaxConnectionSamples)
	if len(got) > MaxConnectionSamples || len(got) < MaxConnectionSamples/2 {
		t.Fatalf("%d samples, want at most %d and more than half", len(got), MaxConnectionSamples)
	}
	var sum uint64
	for _, x := range got {
		sum += x.Bytes
	}
	if sum != total || got[len(got)-1].EndNS != 500000 {
		t.Errorf("sum %d (want %d), last end %d (want 500000)", sum, total, got[len(got)-1].EndNS)
	}
}
