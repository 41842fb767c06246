package advice

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

const ms = int64(1e6)

// steady is n polls 100 ms apart from t, each with b bytes.
func steady(t int64, n int, b uint64) []record.DownloadSample {
	var out []record.DownloadSample
	for i := 1; i <= n; i++ {
		out = append(out, record.DownloadSample{EndNS: t + int64(i)*100*ms, Bytes: b})
	}
	return out
}

func TestStallsOfFindsSilenceLongerThanFiveSeconds(t *testing.T) {
	s := steady(0, 20, 1<<20)                                                      // 20 MiB by 2.0 s
	s = append(s, record.DownloadSample{EndNS: 2000*ms + 6100*ms, Bytes: 1 << 20}) // 6 s of nothing
	s = append(s, steady(8100*ms, 9, 1<<20)...)
	got := StallsOf(s, 0, 100*ms)
	if len(got) != 1 {
		t.Fatalf("stalls = %+v, want one", got)
	}
	g := got[0]
	if g.StartNS != 1950*ms || g.LengthNS != 6100*ms || g.Before != 20<<20 || g.After != 10<<20 || g.Slow {
		t.Errorf("stall = %+v, want 6 s at 2 s, 20 MiB before, 10 MiB after", g)
	}
}

func TestStallsOfIgnoresSilenceUnderFiveSeconds(t *testing.T) {
	s := steady(0, 20, 1<<20)
	s = append(s, record.DownloadSample{EndNS: 2000*ms + 4900*ms, Bytes: 1 << 20})
	s = append(s, steady(6900*ms, 9, 1<<20)...)
	if got := StallsOf(s, 0, 100*ms); len(got) != 0 {
		t.Errorf("stalls = %+v, want none under 5 s", got)
	}
}

func TestStallsOfScalesWithTheMedianGap(t *testing.T) {
	// Polls with data every 500 ms: a 6 s gap is 12 medians, under 20.
	var s []record.DownloadSample
	for i := int64(1); i <= 10; i++ {
		s = append(s, record.DownloadSample{EndNS: i * 500 * ms, Bytes: 1 << 20})
	}
	s = append(s, record.DownloadSample{EndNS: 11000 * ms, Bytes: 1 << 20})
	if got := StallsOf(s, 0, 100*ms); len(got) != 0 {
		t.Errorf("stalls = %+v, want none: the gap is 12 median gaps", got)
	}
	// A 10.5 s gap is 21 of them.
	s[len(s)-1].EndNS = 15500 * ms
	if got := StallsOf(s, 0, 100*ms); len(got) != 1 || got[0].LengthNS != 10500*ms || got[0].StartNS != 4950*ms {
		t.Errorf("stalls = %+v, want one of 10.5 s at 4.95 s", got)
	}
}

func TestStallsOfFindsATrickle(t *testing.T) {
	s := steady(0, 20, 1<<20)
	s = append(s, steady(2000*ms, 60, 4<<10)...) // 6 s at 40 KiB/s, under 5% of 10 MiB/s
	s = append(s, steady(8000*ms, 10, 1<<20)...)
	got := StallsOf(s, 0, 100*ms)
	if len(got) != 1 {
		t.Fatalf("stalls = %+v, want one", got)
	}
	g := got[0]
	if !g.Slow || g.StartNS != 2000*ms || g.LengthNS != 6000*ms || g.Before != 20<<20 || g.During != 60*4<<10 || g.After != 10<<20 {
		t.Errorf("stall = %+v, want a 6 s trickle at 2 s", g)
	}
}

func TestStallsOfIgnoresAShortTrickle(t *testing.T) {
	s := steady(0, 20, 1<<20)
	s = append(s, steady(2000*ms, 40, 4<<10)...) // 4 s
	s = append(s, steady(6000*ms, 10, 1<<20)...)
	if got := StallsOf(s, 0, 100*ms); len(got) != 0 {
		t.Errorf("stalls = %+v, want none under 5 s", got)
	}
}

func TestStallsNameTheDownloadAndRankAsATrap(t *testing.T) {
	s := steady(0, 12, 1<<20)
	s = append(s, record.DownloadSample{EndNS: 1200*ms + 8000*ms, Bytes: 1 << 20})
	s = append(s, steady(9200*ms, 7, 1<<20)...)
	r := &record.Record{IntervalNS: 100 * ms, Downloads: []record.Download{{Name: "model.bin", Host: "hub.example", Peer: "10.0.0.1:443",
		Bytes: 20 << 20, StartNS: 0, EndNS: 10000 * ms, Samples: s}}}
	a := Of(r, nil)
	if len(a.Stalls) != 1 {
		t.Fatalf("stalls = %+v", a.Stalls)
	}
	if s := a.Stalls[0]; s.Download != "model.bin" || s.Host != "hub.example" || s.LengthNS != 8000*ms || s.BytesBefore != 12<<20 || s.AfterShare != 0.4 {
		t.Errorf("stall = %+v", s)
	}
	traps := Traps(a)
	if len(traps) != 1 || traps[0].Kind != "download_stall" || traps[0].CostNS != 8000*ms {
		t.Errorf("traps = %+v", traps)
	}
	if len(a.Next) != 1 || a.Next[0].SavesNS != 8000*ms || a.Next[0].Finding.FindingKind() != KindStall {
		t.Errorf("next = %+v", a.Next)
	}
}

func TestStallsFindAConnectionStalledWhileAnotherWentOn(t *testing.T) {
	a := steady(0, 100, 1<<20) // 10 s of data
	b := append(steady(0, 10, 1<<20), record.DownloadSample{EndNS: 8000 * ms, Bytes: 1 << 20})
	var all []record.DownloadSample
	for i := range a {
		all = append(all, a[i])
		if i < 10 {
			all[i].Bytes += b[i].Bytes
		}
		if a[i].EndNS == 8000*ms {
			all[i].Bytes += 1 << 20
		}
	}
	r := &record.Record{IntervalNS: 100 * ms, Downloads: []record.Download{{Name: "model.bin", Host: "hub.example", Bytes: 111 << 20, EndNS: 10000 * ms, Samples: all,
		Connections: []record.DownloadConnection{{Peer: "10.0.0.1:443", Bytes: 100 << 20, Samples: a}, {Peer: "10.0.0.2:443", Host: "cdn.example", Bytes: 11 << 20, Samples: b}}}}}
	got := Stalls(r)
	if len(got) != 1 {
		t.Fatalf("stalls = %+v, want one", got)
	}
	g := got[0]
	if g.Connection != 2 || g.Host != "cdn.example" || g.StartNS != 950*ms || g.LengthNS != 7000*ms || g.BytesBefore != 10<<20 || g.BytesAfter != 1<<20 {
		t.Errorf("stall = %+v", g)
	}
	if g.Connections != 2 || g.Download != "model.bin" {
		t.Errorf("stall = %+v", g)
	}
}
