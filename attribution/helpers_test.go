package attribution

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

const ms = int64(1e6)

// rec builds a record by hand: times are given in milliseconds.
type rec struct{ *record.Record }

func newRec(wallMS int64) rec {
	return rec{&record.Record{Schema: record.Schema, WallNS: wallMS * ms, IntervalNS: 100 * ms}}
}

func (r rec) proc(pid, ppid int32, comm string) rec {
	r.Processes = append(r.Processes, record.Process{PID: pid, PPID: ppid, Comm: comm})
	return r
}

func (r rec) file(path string, missedPages uint64) rec {
	id := len(r.Files)
	r.Files = append(r.Files, record.File{ID: id, Path: path, PagesAccessed: missedPages,
		PagesMissed: missedPages, BytesFromDisk: missedPages * 4096})
	return r
}

// th is a thread delta in milliseconds.
type th struct {
	tid, pid                     int32
	cpu, io, miss, rq, otherWait int64
}

// fd is a file delta in milliseconds.
type fd struct {
	id          int
	io, missCPU int64
}

// sample adds a sample ending at endMS.
func (r rec) sample(endMS int64, threads []th, files ...fd) rec {
	s := record.Sample{EndNS: endMS * ms}
	for _, t := range threads {
		s.Threads = append(s.Threads, record.ThreadDelta{TID: t.tid, PID: t.pid, CPUNS: t.cpu * ms,
			IOWaitNS: t.io * ms, MissCPUNS: t.miss * ms, RunQueueNS: t.rq * ms, OtherWaitNS: t.otherWait * ms})
	}
	for _, f := range files {
		s.Files = append(s.Files, record.FileDelta{File: f.id, IOWaitNS: f.io * ms, MissCPUNS: f.missCPU * ms})
	}
	r.Samples = append(r.Samples, s)
	return r
}

// every adds samples every 100 ms over (fromMS, toMS], each with the same
// deltas.
func (r rec) every(fromMS, toMS int64, threads []th, files ...fd) rec {
	for t := fromMS + 100; t <= toMS; t += 100 {
		r = r.sample(t, threads, files...)
	}
	return r
}

// split is a breakdown in milliseconds, in Categories order.
type split struct{ disk, jit, gpu, dl, cpu, other int64 }

func (s split) ns() [numCategories]int64 {
	return [numCategories]int64{s.disk * ms, s.jit * ms, s.gpu * ms, s.dl * ms, s.cpu * ms, s.other * ms}
}

func rowNS(res *Result) [numCategories]int64 {
	var out [numCategories]int64
	for i, row := range res.Breakdown {
		out[i] = row.NS
	}
	return out
}

// span is a phase in milliseconds.
type phaseWant struct {
	startMS, endMS int64
	dominant       Category
}

func checkPhases(t *testing.T, res *Result, want []phaseWant) {
	t.Helper()
	got := make([]phaseWant, len(res.Phases))
	for i, p := range res.Phases {
		got[i] = phaseWant{p.StartNS / ms, p.EndNS / ms, p.Dominant}
		if p.StartNS%ms != 0 || p.EndNS%ms != 0 {
			t.Errorf("phase %d bounds not whole ms: %d–%d", i, p.StartNS, p.EndNS)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("phases = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("phase %d = %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}

// checkInvariants holds for every result: rows in order summing to the
// wall, percentages summing to 100, phases contiguous over [0, wall],
// evidence summing to its row.
func checkInvariants(t *testing.T, res *Result) {
	t.Helper()
	if len(res.Breakdown) != numCategories {
		t.Fatalf("breakdown has %d rows", len(res.Breakdown))
	}
	var sum int64
	pct := 0
	for i, row := range res.Breakdown {
		if row.Category != Categories[i] {
			t.Errorf("row %d is %s, want %s", i, row.Category, Categories[i])
		}
		if row.NS < 0 {
			t.Errorf("row %s negative: %d", row.Category, row.NS)
		}
		sum += row.NS
		pct += row.Pct
	}
	if sum != res.WallNS {
		t.Errorf("rows sum to %d, wall is %d", sum, res.WallNS)
	}
	if res.WallNS > 0 && pct != 100 {
		t.Errorf("pct sums to %d", pct)
	}
	if res.WallNS == 0 {
		if len(res.Phases) != 0 {
			t.Errorf("empty run has phases %v", res.Phases)
		}
	} else {
		at := int64(0)
		for i, p := range res.Phases {
			if p.StartNS != at || p.EndNS <= p.StartNS {
				t.Errorf("phase %d is %d–%d, expected to start at %d", i, p.StartNS, p.EndNS, at)
			}
			var ps int64
			for _, s := range p.Split {
				ps += s.NS
			}
			if ps != p.EndNS-p.StartNS {
				t.Errorf("phase %d split sums to %d, length %d", i, ps, p.EndNS-p.StartNS)
			}
			at = p.EndNS
		}
		if at != res.WallNS {
			t.Errorf("phases end at %d, wall is %d", at, res.WallNS)
		}
	}
	for _, row := range res.Breakdown {
		if row.NS == 0 {
			continue
		}
		check := func(kind string, n int, ns func(int) int64) {
			if n == 0 {
				return
			}
			var s int64
			for i := range n {
				s += ns(i)
				if i > 0 && ns(i) > ns(i-1) {
					t.Errorf("%s %s evidence not sorted by ns", row.Category, kind)
				}
			}
			if s != row.NS {
				t.Errorf("%s %s evidence sums to %d, row is %d", row.Category, kind, s, row.NS)
			}
		}
		check("file", len(row.Files), func(i int) int64 { return row.Files[i].NS })
		check("process", len(row.Processes), func(i int) int64 { return row.Processes[i].NS })
		check("compiler", len(row.Compilers), func(i int) int64 { return row.Compilers[i].NS })
		check("download", len(row.Downloads), func(i int) int64 { return row.Downloads[i].NS })
		check("gpu", len(row.GPUs), func(i int) int64 { return row.GPUs[i].NS })
	}
	var ss int64
	for _, s := range res.Slices {
		ss += s.Split.Total()
	}
	if ss != res.WallNS {
		t.Errorf("slices sum to %d", ss)
	}
}

// hubCache is a Hugging Face hub cache rooted at "hub" on filesystem fs.
func hubCache(fs string, volatile bool) record.Cache {
	return record.Cache{Name: "huggingface", Root: "hub", Framework: "Hugging Face hub (weights)", FS: fs, Volatile: volatile}
}
