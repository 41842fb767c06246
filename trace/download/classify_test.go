package download

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

const ms = 1_000_000

func TestIsDownload(t *testing.T) {
	peer := netip.MustParseAddrPort("10.0.0.1:443")
	cases := map[string]struct {
		bytes, recvs, sent uint64
		want               bool
	}{
		"64 MiB in 64 KiB receives":                   {64 << 20, 1024, 200, true},
		"exactly the size and mean limits":            {MinBytes, MinBytes / MinMeanReceive, MinBytes / MinMeanAsymmetry, true},
		"large receives, just too much sent":          {MinBytes, MinBytes / MinMeanReceive, MinBytes/MinMeanAsymmetry + 1, false},
		"ping-pong of 64 KiB messages":                {64 << 20, 1024, 64 << 20, false},
		"ping-pong of 1 MiB messages":                 {64 << 20, 64, 64 << 20, false},
		"one byte short":                              {MinBytes - 1, 1, 0, false},
		"1 MiB":                                       {1 << 20, 16, 100, false},
		"keep-alive chatter, 6 MiB in 1 KiB answers":  {6 << 20, 6 << 10, (6 << 10) * 80, false},
		"mean just under 16 KiB, as much sent":        {MinBytes, MinBytes/MinMeanReceive + 1, MinBytes, false},
		"ping-pong of 8 KiB messages":                 {64 << 20, 8 << 10, 64 << 20, false},
		"HTTPS: 5-byte record headers, small request": {64 << 20, 8223, 1500, true},
		"wget: 8 KiB receives":                        {64 << 20, 8321, 150, true},
		"exactly the asymmetry limit":                 {MinBytes, MinBytes / 1024, MinBytes / MinAsymmetry, true},
		"just under the asymmetry limit":              {MinBytes, MinBytes / 1024, MinBytes/MinAsymmetry + 1, false},
		"bytes without a receive (cannot be)":         {MinBytes, 0, 0, false},
	}
	for name, tc := range cases {
		c := Conn{Peer: peer, Bytes: tc.bytes, Receives: tc.recvs, Sent: tc.sent}
		if got := c.IsDownload(); got != tc.want {
			t.Errorf("%s: IsDownload = %v, want %v", name, got, tc.want)
		}
	}
}

func TestBuild(t *testing.T) {
	const start = 1000 * ms
	big := Conn{Sk: 1, ID: start - 50*ms, PID: 10, TID: 11, RxTID: 12, Peer: netip.MustParseAddrPort("127.0.0.1:8765"), Host: "hub.local",
		FirstTS: start + 100*ms, LastTS: start + 2100*ms, Bytes: 64 << 20, Receives: 1000}
	// The same socket address reused by a later, small connection.
	reused := Conn{Sk: 1, ID: start + 3000*ms, PID: 10, TID: 11, RxTID: 11, Peer: netip.MustParseAddrPort("127.0.0.1:8765"),
		FirstTS: start + 3100*ms, LastTS: start + 3200*ms, Bytes: 1 << 20, Receives: 20}
	mem := Conn{Sk: 2, ID: start, PID: 10, TID: 13, RxTID: 13, Peer: netip.MustParseAddrPort("[::1]:443"),
		FirstTS: start + 50*ms, LastTS: start + 550*ms, Bytes: 8 << 20, Receives: 128}
	writes := []Write{
		{Sk: 1, ID: big.ID, Dev: 8, Ino: 100, Bytes: 64 << 20, FirstTS: start + 110*ms, LastTS: start + 2100*ms},
		{Sk: 1, ID: big.ID, Dev: 8, Ino: 101, Bytes: 4096, FirstTS: start + 2150*ms, LastTS: start + 2150*ms},
		// Written long after the download ended: not part of it.
		{Sk: 1, ID: big.ID, Dev: 8, Ino: 102, Bytes: 1 << 20, FirstTS: start + 9000*ms, LastTS: start + 9100*ms},
		// Written by the thread after the reused connection's receive.
		{Sk: 1, ID: reused.ID, Dev: 8, Ino: 103, Bytes: 1 << 20, FirstTS: start + 3150*ms, LastTS: start + 3200*ms},
	}
	names := map[uint64]string{100: "/hub/blobs/abc", 101: "/hub/refs/main"}
	locate := func(k FileKey) Located {
		if k.Ino == 100 {
			return Located{Path: names[k.Ino], WrittenPath: names[k.Ino] + ".incomplete"}
		}
		return Located{Path: names[k.Ino]}
	}
	// Thread 12 on CPU 20 ms and waiting 60 ms in every 100 ms interval.
	var samples []record.Sample
	for end := int64(100 * ms); end <= 3000*ms; end += 100 * ms {
		samples = append(samples, record.Sample{EndNS: end, Threads: []record.ThreadDelta{
			{TID: 12, PID: 10, CPUNS: 20 * ms, OtherWaitNS: 60 * ms, IOWaitNS: 20 * ms},
			{TID: 13, PID: 10, CPUNS: 100 * ms},
		}})
	}
	progress := map[ConnKey][]Progress{
		{big.Sk, big.ID}: {{start + 600*ms, 10 << 20}, {start + 1600*ms, 40 << 20}, {start + 1700*ms, 40 << 20}},
	}
	got := Build([]Conn{reused, big, mem}, writes, Env{StartMono: start, Locate: locate, Samples: samples, IntervalNS: 100 * ms, Progress: progress})
	if len(got) != 2 {
		t.Fatalf("got %d downloads, want 2 (the 64 MiB one and the 8 MiB one to memory): %+v", len(got), got)
	}
	m, d := got[0], got[1]
	if m.Peer != "[::1]:443" || m.Path != "" || len(m.Files) != 0 || m.StartNS != 50*ms || m.EndNS != 550*ms {
		t.Errorf("download to memory: %+v", m)
	}
	if m.OnCPUNS != 500*ms || m.WaitNS != 0 {
		t.Errorf("download to memory: thread time on CPU %d, waiting %d; want 500 ms, 0", m.OnCPUNS, m.WaitNS)
	}
	if d.Peer != "127.0.0.1:8765" || d.Host != "hub.local" || d.Bytes != 64<<20 || d.PID != 10 || d.TID != 12 || d.Receives != 1000 {
		t.Errorf("download: %+v", d)
	}
	if d.StartNS != 100*ms || d.EndNS != 2100*ms || d.ConnectNS != -50*ms {
		t.Errorf("download span: start %d end %d connect %d", d.StartNS, d.EndNS, d.ConnectNS)
	}
	if d.Path != "/hub/blobs/abc" || len(d.Files) != 2 || d.Files[0].WrittenPath != "/hub/blobs/abc.incomplete" || d.Files[1].Path != "/hub/refs/main" {
		t.Errorf("download files: path %q, %+v", d.Path, d.Files)
	}
	// 2 s of the thread's samples: 20% on CPU, 60% waiting.
	if d.OnCPUNS != 400*ms || d.WaitNS != 1200*ms {
		t.Errorf("download thread time: on CPU %d, waiting %d; want 400 ms, 1200 ms", d.OnCPUNS, d.WaitNS)
	}
	wantSamples := []record.DownloadSample{{EndNS: 600 * ms, Bytes: 10 << 20}, {EndNS: 1600 * ms, Bytes: 30 << 20}, {EndNS: 2100 * ms, Bytes: 24 << 20}}
	if !slices.Equal(d.Samples, wantSamples) {
		t.Errorf("download samples %+v, want %+v", d.Samples, wantSamples)
	}
	if want := []record.DownloadSample{{EndNS: 550 * ms, Bytes: 8 << 20}}; !slices.Equal(m.Samples, want) {
		t.Errorf("unpolled download's samples %+v, want %+v", m.Samples, want)
	}
	if r := d.MBPerSecond(); r < 33.5 || r > 33.6 {
		t.Errorf("rate %.2f MB/s, want 33.55", r)
	}
}

func TestThreadTimeProratesPartialIntervals(t *testing.T) {
	samples := []record.Sample{
		{EndNS: 100 * ms, Threads: []record.ThreadDelta{{TID: 1, CPUNS: 100 * ms}}},
		{EndNS: 200 * ms, Threads: []record.ThreadDelta{{TID: 1, OtherWaitNS: 100 * ms}}},
	}
	cpu, wait := threadTime(samples, 100*ms, 1, 75*ms, 125*ms)
	if cpu != 25*ms || wait != 25*ms {
		t.Errorf("on CPU %d, waiting %d; want 25 ms each", cpu, wait)
	}
}

// A coarsened sample (a long run's, several polls) is prorated over its
// own span, not over one interval.
func TestThreadTimeCoarseSample(t *testing.T) {
	samples := []record.Sample{
		{EndNS: 100 * ms, Threads: []record.ThreadDelta{{TID: 1, CPUNS: 100 * ms}}},
		{EndNS: 500 * ms, Threads: []record.ThreadDelta{{TID: 1, CPUNS: 200 * ms, OtherWaitNS: 200 * ms}}},
	}
	cpu, wait := threadTime(samples, 100*ms, 1, 300*ms, 500*ms)
	if cpu != 100*ms || wait != 100*ms {
		t.Errorf("on CPU %d, waiting %d; want 100 ms each (half of the 400 ms sample)", cpu, wait)
	}
}
