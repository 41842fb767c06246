package attribution

import (
	"testing"

	"github.com/coldtrace/coldtrace/record"
)

// gpuRounds is a record of three rounds on one GPU, polled every 100 ms:
// round 1 (0.5–1.5 s) loads 4 GiB with no kernels, then runs; round 2
// (1.5–2.5 s) runs on what is loaded; the process exits at 2.5 s and the
// poll after the exit shows the VRAM released.
func gpuRounds() *record.Record {
	const gib = uint64(1) << 30
	r := busyRecord(2500*ms, func(int) bool { return true })
	r.Marks = []record.Mark{{AtNS: 500 * ms, Label: "round 1"}, {AtNS: 1500 * ms, Label: "round 2"}}
	g := &record.GPU{Devices: []record.GPUDevice{{Index: 0, Name: "GPU", MemTotal: 80 * gib}}}
	for i := 0; i <= 26; i++ {
		t := int64(i) * 100 * ms
		run, util := uint64(0), uint32(0)
		switch {
		case t > 2500*ms: // after the exit
		case t > 1000*ms:
			run, util = 3*gib, 90
		case t > 500*ms:
			run = 4 * gib
		}
		g.Samples = append(g.Samples, record.GPUSample{TNS: t, UtilGPUPct: util, MemUsedBytes: gib + run})
		if run > 0 {
			m := run
			g.Processes = append(g.Processes, record.GPUProcessSample{TNS: t, PID: 1, MemUsedBytes: &m})
		}
	}
	r.GPU = g
	return r
}

func TestSegmentGPUsSayWhatEachRoundAllocated(t *testing.T) {
	const gib = uint64(1) << 30
	r := gpuRounds()
	res := Options{}.AnalyzeSegments(r, Segments(r, SegmentOptions{}))
	if len(res) != 3 {
		t.Fatalf("%d segments", len(res))
	}
	r1, r2 := res[1].GPUs[0], res[2].GPUs[0]
	if r1.VRAMStartBytes != gib || r1.VRAMPeakBytes != 5*gib || r1.VRAMEndBytes != 4*gib ||
		r1.AllocatedBytes != 4*gib || r1.AllocatedBy != "processes" || r1.RunVRAMEndBytes != 3*gib {
		t.Errorf("round 1 = %+v", r1)
	}
	// Round 1 ran kernels in its polls at 1.1–1.5 s (each covering the
	// 100 ms before it): 500 ms; round 2 in all ten of its polls.
	if r1.BusyNS != 500*ms || r2.BusyNS != 1000*ms {
		t.Errorf("busy %d, %d ns; want 500 ms, 1 s", r1.BusyNS, r2.BusyNS)
	}
	if r2.VRAMStartBytes != 4*gib || r2.VRAMPeakBytes != 4*gib || r2.AllocatedBytes != 0 {
		t.Errorf("round 2 = %+v", r2)
	}
	ex := res[2].VRAMAtExit
	if len(ex) != 1 || !ex[0].Released || ex[0].BeforeBytes != 4*gib || ex[0].AfterBytes != gib {
		t.Errorf("at exit %+v, want released 4 → 1 GiB", ex)
	}
	if res[0].VRAMAtExit != nil || res[1].VRAMAtExit != nil {
		t.Error("only the last segment says what happened at the exit")
	}
}

func TestSegmentGPUsWithoutProcessesUseTheDevice(t *testing.T) {
	const gib = uint64(1) << 30
	r := gpuRounds()
	r.GPU.Processes = nil
	r.GPU.Devices[0].Unsupported = []string{record.GPUFieldProcesses}
	g := SegmentGPUs(r, 500*ms, 1500*ms)[0]
	if g.RunVRAMKnown || g.AllocatedBy != "device" || g.AllocatedBytes != 4*gib {
		t.Errorf("round 1 = %+v, want 4 GiB of device growth", g)
	}
}

func TestSliceRecordKeepsThePollBeforeTheSegment(t *testing.T) {
	const gib = uint64(1) << 30
	r := gpuRounds()
	sub := SliceRecord(r, 1500*ms, 2500*ms)
	ss := sub.GPU.DeviceSamples(0)
	if len(ss) == 0 || ss[0].TNS != 0 || ss[0].MemUsedBytes != 4*gib {
		t.Fatalf("first sample of round 2 = %+v, want the poll at its start", ss[0])
	}
	sum := sub.GPU.Summaries()[0]
	if sum.VRAMBeforeBytes != 4*gib || sum.BusyNS != 1000*ms {
		t.Errorf("round 2 summary %+v, want 4 GiB before and 1 s busy", sum)
	}
}

func TestSegmentGPUsLostInASegment(t *testing.T) {
	r := gpuRounds()
	at := int64(1800 * ms)
	r.GPU.Devices[0].LostNS, r.GPU.Devices[0].LostReason = &at, "GPU is lost"
	var kept []record.GPUSample
	for _, s := range r.GPU.Samples {
		if s.TNS < at {
			kept = append(kept, s)
		}
	}
	r.GPU.Samples = kept
	segs := SegmentGPUs(r, 1500*ms, 2500*ms)
	if segs[0].LostNS == nil || *segs[0].LostNS != 300*ms {
		t.Errorf("round 2 = %+v, want lost 300 ms in", segs[0])
	}
	if g := SegmentGPUs(r, 500*ms, 1500*ms)[0]; g.LostNS != nil {
		t.Errorf("round 1 = %+v, not lost", g)
	}
	res := Analyze(r)
	n := 0
	for _, note := range res.Notes {
		if note.Kind == NoteGPULost && note.NS == at && note.Text == "GPU is lost" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("notes %+v, want one gpu_lost at %d", res.Notes, at)
	}
}
