package attribution

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/record"
)

func loadFixture(t *testing.T, name string) *record.Record {
	t.Helper()
	r, err := record.ReadFile(filepath.Join("..", "testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type analyzeCase struct {
	name   string
	record func(t *testing.T) *record.Record
	want   split
	phases []phaseWant
	warmMS int64
	cold   bool
	// verdict and notes are substrings of the verdict and the notes in
	// words; words_test.go (package attribution_test) checks them through
	// report/words, which this package cannot import.
	verdict []string
	notes   []string
	check   func(t *testing.T, res *Result)
}

func spin(tid, pid int32, cpu int64) th { return th{tid: tid, pid: pid, cpu: cpu} }

var analyzeCases = []analyzeCase{
	{
		// sleep 1 s; cold read of a file for 0.5 s (60 ms I/O wait, 30 ms of
		// miss CPU and 10 ms of other CPU per 100 ms); spin to 3450 ms (one
		// sample reports 103 ms in 100 ms); no sample for the last 30 ms. A
		// helper thread sleeps the whole run. First slice 0–40 ms.
		name:   "sleep-read-spin fixture",
		record: func(t *testing.T) *record.Record { return loadFixture(t, "sleep-read-spin") },
		want:   split{disk: 450, cpu: 50 + 1950, other: 1000 + 30},
		phases: []phaseWant{{0, 1000, OtherWait}, {1000, 1500, DiskRead}, {1500, 3480, CPU}},
		warmMS: 3480 - 450,
		cold:   true,
		verdict: []string{
			"cold start: 13% disk reads (data/big.bin not in page cache)",
			"a warm rerun should take ~3.0s",
		},
		check: func(t *testing.T, res *Result) {
			if res.UnobservedNS != 30*ms {
				t.Errorf("unobserved = %d", res.UnobservedNS)
			}
			disk := res.Row(DiskRead)
			if disk.SignalNS != 450*ms || len(disk.Files) != 1 || disk.Files[0].Path != "data/big.bin" ||
				disk.Files[0].NS != 450*ms || disk.Files[0].MissRatio != 1 {
				t.Errorf("disk evidence = %+v", disk.Files)
			}
			if p := res.Phases[1]; p.Name != "load" || p.Split[0].Share != 0.9 {
				t.Errorf("load phase = %+v", p)
			}
			if res.Row(CPU).SignalNS != 2003*ms {
				t.Errorf("cpu signal = %d (the 103 ms sample is clamped only in the partition)", res.Row(CPU).SignalNS)
			}
			if res.Row(OtherWait).SignalNS != 3450*ms {
				t.Errorf("other signal = %d (the helper's explicit waits)", res.Row(OtherWait).SignalNS)
			}
		},
	},
	{
		// One thread reads a cold file (80 ms I/O + 10 ms miss CPU per
		// 100 ms) while another spins: the rule gives disk_read first, the
		// spinner only what is left. The warm estimate keeps the spinning.
		name:   "reader+spinner fixture",
		record: func(t *testing.T) *record.Record { return loadFixture(t, "reader-spinner") },
		want:   split{disk: 900, cpu: 100},
		phases: []phaseWant{{0, 1000, DiskRead}},
		warmMS: 1000,
		cold:   true,
		verdict: []string{
			"cold start: 90% disk reads (models/qwen_image_fp8.safetensors and 1 other file not in page cache)",
			"~1.0s",
		},
		check: func(t *testing.T, res *Result) {
			files := res.Row(DiskRead).Files
			want := []struct {
				path string
				ns   int64
			}{{"models/qwen_image_fp8.safetensors", 700 * ms}, {"models/lora.safetensors", 180 * ms}, {OutsidePageCache, 20 * ms}}
			if len(files) != len(want) {
				t.Fatalf("files = %+v", files)
			}
			for i, w := range want {
				if files[i].Path != w.path || files[i].NS != w.ns {
					t.Errorf("file %d = %s %d, want %s %d", i, files[i].Path, files[i].NS, w.path, w.ns)
				}
			}
			if s := res.Row(CPU).SignalNS; s != 1000*ms {
				t.Errorf("cpu signal = %d: the spinner's thread time stays visible", s)
			}
		},
	},
	{
		// A cold ML run: a 0.5 s download, a 2 s cold load of the weights,
		// Triton compiling in process (0.5 s) then five ptxas runs (1 s),
		// 1.8 s of GPU compute with the host spinning, 0.2 s of CPU.
		name:   "cold ML run fixture",
		record: func(t *testing.T) *record.Record { return loadFixture(t, "cold-ml") },
		want:   split{dl: 500, disk: 1800, jit: 500 + 950, gpu: 1800, cpu: 200 + 200, other: 50},
		phases: []phaseWant{{0, 500, Download}, {500, 2500, DiskRead}, {2500, 4000, JITCompile},
			{4000, 5800, GPUCompute}, {5800, 6000, CPU}},
		warmMS: 6000 - 1800 - 1450 - 500,
		cold:   true,
		verdict: []string{
			"cold start: 30% disk reads (/home/dev/models/qwen_image_fp8.safetensors not in page cache), 24% JIT compile (ptxas, triton), 8% downloads",
			"a warm rerun should take ~2.3s.",
		},
		check: func(t *testing.T, res *Result) {
			jit := res.Row(JITCompile)
			if c := jit.Compilers; len(c) != 2 || c[0].Name != "ptxas" || c[0].NS != 950*ms || c[0].Runs != 5 || c[1].Name != "triton" {
				t.Errorf("compilers = %+v", c)
			}
			if c := jit.Caches; len(c) != 3 || c[0].Name != "triton" || c[0].NS != 500*ms || c[1].NS != 0 {
				t.Errorf("caches = %+v", c)
			}
			if d := res.Verdict.Causes[2].Download; d == nil || d.Name != "transformer/diffusion_pytorch_model.safetensors" ||
				d.Fate != FateKept || d.Host != "huggingface.co" || d.Bytes != 300<<20 {
				t.Errorf("the verdict's download = %+v", d)
			}
			if g := res.Row(GPUCompute).GPUs; len(g) != 1 || g[0].Device.VRAMPeakBytes != 22<<30 || g[0].Device.UtilPeakPct != 100 || g[0].BusyNS != 1800*ms {
				t.Errorf("gpus = %+v", g)
			}
		},
	},
	{
		// sh (pid 100) spins and exits at 500 ms, which ends the run; its
		// child (101) started spinning at 300 ms and runs on to 750 ms.
		// The sample at 550 ms straddles the exit and is scaled to 100/150:
		// sh 300 + 50 + 40 ms, worker 50 + 60 ms.
		name: "child outlives parent",
		record: func(t *testing.T) *record.Record {
			return newRec(500).proc(100, 1, "sh").proc(101, 100, "worker").
				every(0, 300, []th{spin(100, 100, 100)}).
				every(300, 400, []th{spin(100, 100, 100), spin(101, 101, 100)}).
				sample(550, []th{spin(100, 100, 100), spin(101, 101, 150)}).
				sample(650, []th{spin(101, 101, 100)}).
				sample(750, []th{spin(101, 101, 100)}).Record
		},
		want:    split{cpu: 500},
		phases:  []phaseWant{{0, 500, CPU}},
		warmMS:  500,
		verdict: []string{"warm run: 100% CPU; nothing came from disk"},
		check: func(t *testing.T, res *Result) {
			procs := res.Row(CPU).Processes
			if len(procs) != 2 || procs[0].PID != 100 || procs[0].NS != 390*ms || procs[1].Comm != "worker" || procs[1].NS != 110*ms {
				t.Errorf("processes = %+v", procs)
			}
			if res.AfterExitNS != 283333333 {
				t.Errorf("after exit = %d", res.AfterExitNS)
			}
		},
		notes: []string{"after the command exited"},
	},
	{
		name:    "empty run",
		record:  func(t *testing.T) *record.Record { return newRec(0).Record },
		want:    split{},
		phases:  []phaseWant{},
		verdict: []string{"empty run"},
	},
	{
		name:    "nil record",
		record:  func(t *testing.T) *record.Record { return nil },
		want:    split{},
		phases:  []phaseWant{},
		verdict: []string{"empty run"},
	},
	{
		name:    "no samples",
		record:  func(t *testing.T) *record.Record { return newRec(250).proc(100, 1, "true").Record },
		want:    split{other: 250},
		phases:  []phaseWant{{0, 250, OtherWait}},
		warmMS:  250,
		verdict: []string{"warm run: 100% other wait (sleep, locks, idle); nothing came from disk"},
		check: func(t *testing.T, res *Result) {
			if res.UnobservedNS != 250*ms {
				t.Errorf("unobserved = %d", res.UnobservedNS)
			}
		},
		notes: []string{"no thread samples"},
	},
	{
		// Killed by SIGKILL at 730 ms. The tracer stalled between 300 and
		// 600 ms: the 600 ms sample carries 300 ms of deltas. Its last poll
		// was at 700 ms.
		name: "killed early",
		record: func(t *testing.T) *record.Record {
			r := newRec(730).proc(100, 1, "python3").
				every(0, 300, []th{spin(100, 100, 100)}).
				sample(600, []th{{tid: 100, pid: 100, cpu: 50, io: 250}}, fd{0, 250, 0}).
				sample(700, []th{spin(100, 100, 100)})
			r = r.file("/data/shard-07.bin", 1000)
			r.ExitCode, r.Signal = 137, "SIGKILL"
			return r.Record
		},
		// The 130 ms tail is shorter than a phase and joins the load phase.
		want:    split{disk: 250, cpu: 300 + 50 + 100, other: 30},
		phases:  []phaseWant{{0, 300, CPU}, {300, 730, DiskRead}},
		warmMS:  730 - 250,
		cold:    true,
		verdict: []string{"cold start: 34% disk reads (/data/shard-07.bin not in page cache); a warm rerun should take ~480ms."},
		check: func(t *testing.T, res *Result) {
			if p := res.Phases[1]; p.Split[0].NS != 250*ms || p.Split[4].NS != 150*ms || p.Split[5].NS != 30*ms {
				t.Errorf("load phase split = %+v", p.Split)
			}
		},
		notes: []string{"killed by SIGKILL (exit 137)", "last 30ms after the final sample"},
	},
	{
		// python (10) runs Triton's in-process compile in a JIT window over
		// 0–350 ms, then waits while ptxas (11) compiles over 400–700 ms;
		// in 400–500 ms a generator script (13) that ninja (12) started
		// also runs: it is a compiler's descendant. Then python spins.
		name: "compile window and compiler subprocesses",
		record: func(t *testing.T) *record.Record {
			wait := th{tid: 10, pid: 10, otherWait: 100}
			r := newRec(1000).proc(10, 1, "python3").proc(11, 10, "ptxas").proc(12, 10, "ninja").proc(13, 12, "python3").
				every(0, 400, []th{spin(10, 10, 100)}).
				sample(500, []th{wait, spin(11, 11, 100), spin(13, 13, 50)}).
				every(500, 700, []th{wait, spin(11, 11, 100)}).
				every(700, 1000, []th{spin(10, 10, 100)})
			r.JIT = &record.JIT{
				Caches:    []record.Cache{{Name: "triton", Root: "/home/dev/.triton/cache", Lookups: 12, Misses: 12, EntriesWritten: 12}},
				Compilers: []record.Compiler{{Name: "ptxas", Runs: 3, WallNS: 300 * ms, CPUNS: 300 * ms}},
				Windows:   []record.JITWindow{{PID: 10, StartNS: 0, EndNS: 350 * ms, Kind: "in_process", Source: "triton"}},
			}
			return r.Record
		},
		want:    split{jit: 350 + 300, cpu: 50 + 300},
		phases:  []phaseWant{{0, 700, JITCompile}, {700, 1000, CPU}},
		warmMS:  350,
		cold:    true,
		verdict: []string{"cold start: 65% JIT compile (triton, ptxas); a warm rerun should take ~350ms."},
		check: func(t *testing.T, res *Result) {
			jit := res.Row(JITCompile)
			want := []CompilerEvidence{
				{Kind: "in_process", Name: "triton", NS: 350 * ms},
				{Kind: "compiler", Name: "ptxas", NS: 266666667, Runs: 3, CPUNS: 300 * ms},
				{Kind: "compiler", Name: "python3", NS: 33333333, Runs: 1},
			}
			if len(jit.Compilers) != len(want) {
				t.Fatalf("compilers = %+v", jit.Compilers)
			}
			for i, w := range want {
				g := jit.Compilers[i]
				g.Share = 0
				if !reflect.DeepEqual(g, w) {
					t.Errorf("compiler %d = %+v, want %+v", i, g, w)
				}
			}
			if len(jit.Caches) != 1 || jit.Caches[0].NS != 350*ms || jit.Caches[0].Misses != 12 {
				t.Errorf("caches = %+v", jit.Caches)
			}
			if jit.SignalNS != 700*ms {
				t.Errorf("jit signal = %d", jit.SignalNS)
			}
		},
	},
	{
		// The host thread spins the whole second; the GPU is idle for
		// 0–200 ms, fully busy 200–800 ms, half busy 800–900 ms and idle
		// after. Busy GPU time is gpu_compute even though the host is on
		// CPU.
		name: "GPU busy while host spins",
		record: func(t *testing.T) *record.Record {
			r := newRec(1000).proc(100, 1, "python3").every(0, 1000, []th{spin(100, 100, 100)})
			r.GPU = &record.GPU{Devices: []record.GPUDevice{{Index: 0, Name: "NVIDIA H200", MemTotal: 141 << 30}}}
			for i, u := range []uint32{0, 0, 100, 100, 100, 100, 100, 100, 50, 0} {
				r.GPU.Samples = append(r.GPU.Samples, record.GPUSample{TNS: int64(i+1) * 100 * ms, UtilGPUPct: u, MemUsedBytes: uint64(i) << 30})
			}
			return r.Record
		},
		want:    split{gpu: 650, cpu: 350},
		phases:  []phaseWant{{0, 200, CPU}, {200, 1000, GPUCompute}},
		warmMS:  1000,
		verdict: []string{"warm run: 65% GPU compute, 35% CPU; nothing came from disk"},
		check: func(t *testing.T, res *Result) {
			g := res.Row(GPUCompute).GPUs
			// The first sample is the state before the run; the mean is
			// over the other nine.
			if len(g) != 1 || g[0].Name != "NVIDIA H200" || g[0].NS != 650*ms || g[0].BusyNS != 650*ms ||
				int(g[0].Device.UtilMeanPct*100) != 7222 || g[0].Device.VRAMPeakBytes != 9<<30 {
				t.Errorf("gpus = %+v", g)
			}
			if p := res.Phases[1]; p.Name != "compute" {
				t.Errorf("phase name = %q", p.Name)
			}
		},
	},
	{
		// Two GPUs: the busier one in each slice sets gpu_compute; the
		// evidence splits it by each device's busy time. The samples at 0
		// are the state before the run.
		name: "two GPUs, busiest wins",
		record: func(t *testing.T) *record.Record {
			r := newRec(400).every(0, 400, []th{spin(1, 1, 100)})
			r.GPU = &record.GPU{}
			for i, u := range [][2]uint32{{90, 90}, {100, 0}, {0, 50}, {20, 40}, {0, 0}} {
				for dev, v := range u {
					r.GPU.Samples = append(r.GPU.Samples, record.GPUSample{TNS: int64(i) * 100 * ms, Device: dev, UtilGPUPct: v})
				}
			}
			return r.Record
		},
		// Phases: 0–200 GPU (100 ms, then a 50/50 tie that goes to the GPU),
		// 200–400 CPU.
		want:    split{gpu: 100 + 50 + 40, cpu: 210},
		phases:  []phaseWant{{0, 200, GPUCompute}, {200, 400, CPU}},
		warmMS:  400,
		verdict: []string{"warm run: 52% CPU, 48% GPU compute"},
		check: func(t *testing.T, res *Result) {
			g := res.Row(GPUCompute).GPUs
			// dev0: 100 + 40×20/60 ; dev1: 50 + 40×40/60.
			if len(g) != 2 || g[0].Index != 0 || g[0].NS != 113333333 || g[1].NS != 76666667 || g[1].BusyNS != 90*ms {
				t.Errorf("gpus = %+v", g)
			}
		},
	},
	{
		// Another job shares the GPU: per-process utilisation gives the
		// run half of its work, so a fully busy GPU counts 50%. The first
		// sample, taken before the release, covers nothing.
		name: "GPU shared with an untraced process",
		record: func(t *testing.T) *record.Record {
			r := newRec(400).proc(1, 0, "python3").every(0, 400, []th{spin(1, 1, 100)})
			util := uint32(30)
			r.GPU = &record.GPU{
				Devices:      []record.GPUDevice{{Index: 0, Name: "NVIDIA H200"}},
				Processes:    []record.GPUProcessSample{{TNS: 200 * ms, PID: 1, SMUtilPct: &util}},
				Interference: []record.GPUInterference{{PID: 999, Name: "other-job", Polls: 4, UtilPolls: 1, SMUtilMeanPct: 30}},
			}
			for _, tms := range []int64{-20, 100, 200, 300, 400} {
				r.GPU.Samples = append(r.GPU.Samples, record.GPUSample{TNS: tms * ms, UtilGPUPct: 100})
			}
			return r.Record
		},
		want:    split{gpu: 200, cpu: 200},
		phases:  []phaseWant{{0, 400, GPUCompute}},
		warmMS:  400,
		verdict: []string{"warm run: 50% GPU compute, 50% CPU"},
		notes:   []string{"GPU 0 was also used by 1 untraced process(es) (other-job): gpu_compute counts the run's share of its work (50%)"},
	},
	{
		// Two downloads into a persistent cache overlap over 300–400 ms;
		// nobody is on CPU.
		name: "downloads",
		record: func(t *testing.T) *record.Record {
			r := newRec(800).every(0, 800, []th{{tid: 1, pid: 1, otherWait: 100}})
			r.JIT = &record.JIT{Caches: []record.Cache{hubCache("ext4", false)}}
			r.Downloads = []record.Download{
				{Path: "hub/models--a/blobs/1", Name: "model.safetensors", Cache: "huggingface", Peer: "127.0.0.1:8765",
					Bytes: 3 << 20, StartNS: 100 * ms, EndNS: 400 * ms, PID: 1},
				{Path: "hub/models--a/blobs/2", Cache: "huggingface", Peer: "127.0.0.1:8765",
					Bytes: 1 << 20, StartNS: 300 * ms, EndNS: 600 * ms, PID: 1},
			}
			return r.Record
		},
		want: split{dl: 500, other: 300},
		// The first 100 ms of waiting are too short for a phase.
		phases: []phaseWant{{0, 600, Download}, {600, 800, OtherWait}},
		warmMS: 300,
		cold:   true,
		verdict: []string{"cold start: 63% downloads (model.safetensors, 3.0 MiB from 127.0.0.1:8765 at 10 MB/s, " +
			"into the huggingface cache: kept for the next run); a warm rerun should take ~300ms."},
		check: func(t *testing.T, res *Result) {
			d := res.Row(Download).Downloads
			if len(d) != 2 || d[0].NS != 250*ms || d[1].NS != 250*ms || d[0].Bytes != 3<<20 {
				t.Errorf("downloads = %+v", d)
			}
			if d[0].Name != "model.safetensors" || d[1].Name != "2" || d[0].Fate != FateKept || d[0].SpanNS != 300*ms {
				t.Errorf("download evidence = %+v", d)
			}
		},
	},
	{
		// The same downloads, the second kept in memory: a warm rerun
		// fetches it again, so only the time the first alone was in
		// flight (100–300 ms) and the overlap leave the estimate. The
		// first is 5 MiB: kept, it makes the run cold.
		name: "a download kept in memory is repeated",
		record: func(t *testing.T) *record.Record {
			r := newRec(800).every(0, 800, []th{{tid: 1, pid: 1, otherWait: 100}})
			r.JIT = &record.JIT{Caches: []record.Cache{hubCache("ext4", false)}}
			r.Downloads = []record.Download{
				{Path: "hub/models--a/blobs/1", Name: "model.safetensors", Cache: "huggingface", Peer: "127.0.0.1:8765",
					Bytes: 5 << 20, StartNS: 100 * ms, EndNS: 400 * ms, PID: 1},
				{Peer: "10.0.0.1:443", Host: "hub.example", Bytes: 1 << 20, StartNS: 300 * ms, EndNS: 600 * ms, PID: 1},
			}
			return r.Record
		},
		want:    split{dl: 500, other: 300},
		phases:  []phaseWant{{0, 600, Download}, {600, 800, OtherWait}},
		warmMS:  800 - 300,
		cold:    true,
		verdict: []string{"cold start: 63% downloads (model.safetensors,", "a warm rerun should take ~500ms."},
		check: func(t *testing.T, res *Result) {
			d := res.Row(Download).Downloads
			if len(d) != 2 || d[1].Path != "(in memory, from hub.example)" || d[1].Fate != FateMemory {
				t.Errorf("downloads = %+v", d)
			}
		},
	},
	{
		// A download into a cache on tmpfs: a rerun after a reboot
		// downloads it again, so the estimate keeps its time.
		name: "a download into a tmpfs cache is repeated",
		record: func(t *testing.T) *record.Record {
			r := newRec(800).every(0, 800, []th{{tid: 1, pid: 1, otherWait: 100}})
			r.JIT = &record.JIT{Caches: []record.Cache{hubCache("tmpfs", true)}}
			r.Downloads = []record.Download{{Path: "hub/models--a/blobs/1", Name: "model.safetensors", Cache: "huggingface",
				Peer: "127.0.0.1:8765", Host: "localhost", Bytes: 64 << 20, StartNS: 100 * ms, EndNS: 600 * ms, PID: 1}}
			return r.Record
		},
		want:   split{dl: 500, other: 300},
		phases: []phaseWant{{0, 600, Download}, {600, 800, OtherWait}},
		warmMS: 800,
		cold:   true,
		verdict: []string{"cold start: 63% downloads (model.safetensors, 64.0 MiB from localhost at 134 MB/s, " +
			"into the huggingface cache on tmpfs, lost at reboot: a rerun after a reboot downloads it again); a warm rerun should take ~800ms."},
	},
	{
		// A one-slice disk flicker in a long CPU stretch is absorbed; a
		// run-queue wait counts with the thread's on-CPU category.
		name: "flicker absorbed, run queue is cpu",
		record: func(t *testing.T) *record.Record {
			r := newRec(2000).proc(1, 0, "a.out").file("/lib/x.so", 10).
				every(0, 1000, []th{{tid: 1, pid: 1, cpu: 70, rq: 30}}).
				sample(1100, []th{{tid: 1, pid: 1, cpu: 40, miss: 20, io: 60}}, fd{0, 60, 20}).
				every(1100, 2000, []th{spin(1, 1, 100)})
			return r.Record
		},
		want:    split{disk: 80, cpu: 1920},
		phases:  []phaseWant{{0, 2000, CPU}},
		warmMS:  1920,
		verdict: []string{"warm run: 96% CPU; disk reads, compiles and downloads took only 4% (80ms)"},
	},
	{
		// Samples out of order, one repeated end time, one ending before
		// 0, a negative delta and miss CPU above CPU: all land somewhere
		// defined and the rows still sum to the wall.
		name: "messy samples",
		record: func(t *testing.T) *record.Record {
			return newRec(300).
				sample(200, []th{spin(1, 1, 100)}).
				sample(-5, []th{spin(1, 1, 10)}).
				sample(100, []th{{tid: 1, pid: 1, cpu: 50, miss: 80}}).
				sample(200, []th{{tid: 2, pid: 1, cpu: -40, io: 30}}).
				sample(300, []th{spin(1, 1, 100)}).Record
		},
		// 0–100: the -5 ms sample (10 cpu) + cpu 50 of which miss 50 →
		// disk 50, cpu 10; 100–200: cpu 100 and io 30 → disk 30, cpu 70.
		want: split{disk: 80, cpu: 10 + 70 + 100, other: 40},
		// Warm: 0–100 saves its 50 ms of disk; in 100–200 the spinner's 30
		// pushed-out ms would still be spent, and the 30 ms I/O wait no
		// file's fill explains is paid again by a rerun.
		phases:  []phaseWant{{0, 300, CPU}},
		warmMS:  280,
		cold:    true,
		verdict: []string{"cold start: 27% disk reads (files not identified); a warm rerun should take ~280ms."},
	},
}

func TestAnalyze(t *testing.T) {
	for _, tc := range analyzeCases {
		t.Run(tc.name, func(t *testing.T) {
			res := Analyze(tc.record(t))
			checkInvariants(t, res)
			if got, want := rowNS(res), tc.want.ns(); got != want {
				t.Errorf("breakdown (disk, jit, gpu, download, cpu, other) = %v, want %v", got, want)
			}
			checkPhases(t, res, tc.phases)
			if res.WarmEstimateNS != tc.warmMS*ms {
				t.Errorf("warm estimate = %s, want %s", time.Duration(res.WarmEstimateNS), time.Duration(tc.warmMS*ms))
			}
			if res.Cold != tc.cold {
				t.Errorf("cold = %v", res.Cold)
			}
			if wantKind := map[bool]VerdictKind{true: VerdictCold, false: VerdictWarm}[tc.cold]; res.WallNS > 0 && res.Verdict.Kind != wantKind {
				t.Errorf("verdict kind = %q, want %q", res.Verdict.Kind, wantKind)
			}
			if res.Verdict.WarmEstimateNS != res.WarmEstimateNS {
				t.Errorf("verdict estimate %d != result's %d", res.Verdict.WarmEstimateNS, res.WarmEstimateNS)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}
