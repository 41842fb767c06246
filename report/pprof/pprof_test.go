package pprof

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/record/fixtures"
	"github.com/coldtrace/coldtrace/report/format"
)

// collapsed folds a profile into "root;…;leaf" → values, the way
// flame-graph tools read it, with each sample's labels appended.
func collapsed(p *profile.Profile) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, s := range p.Sample {
		var names []string
		for i := len(s.Location) - 1; i >= 0; i-- {
			for _, ln := range s.Location[i].Line {
				names = append(names, ln.Function.Name)
			}
		}
		var labels []string
		for k, v := range s.Label {
			labels = append(labels, k+"="+strings.Join(v, ","))
		}
		for k, v := range s.NumLabel {
			labels = append(labels, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(labels)
		k := strings.Join(names, ";") + " " + strings.Join(labels, " ")
		v := out[k]
		v[0] += s.Value[0]
		v[1] += s.Value[1]
		out[k] = v
	}
	return out
}

func frames(s *profile.Sample) []string {
	var names []string
	for i := len(s.Location) - 1; i >= 0; i-- {
		names = append(names, s.Location[i].Line[0].Function.Name)
	}
	return names
}

func TestPprofRoundTrip(t *testing.T) {
	for name, r := range fixtures.All(t) {
		t.Run(name, func(t *testing.T) {
			res := attribution.Analyze(r)
			built, err := Build(r, res)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := Write(&buf, r, res); err != nil {
				t.Fatal(err)
			}
			p, err := profile.Parse(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CheckValid(); err != nil {
				t.Fatal(err)
			}

			// Same stacks, labels and values after the round trip.
			want, got := collapsed(built), collapsed(p)
			if len(want) != len(got) {
				t.Errorf("%d collapsed stacks after the round trip, want %d", len(got), len(want))
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("stack %q: %v after the round trip, want %v", k, got[k], v)
				}
			}

			if len(p.SampleType) != 2 || p.SampleType[0].Type != WallType || p.SampleType[0].Unit != "nanoseconds" ||
				p.SampleType[1].Type != BytesType || p.SampleType[1].Unit != "bytes" {
				t.Errorf("sample types %v %v", p.SampleType[0], p.SampleType[1])
			}
			if p.DefaultSampleType != WallType {
				t.Errorf("default sample type %q", p.DefaultSampleType)
			}

			// IDs from 1, unique, and no duplicate functions.
			names := map[string]bool{}
			for i, f := range p.Function {
				if f.ID != uint64(i+1) {
					t.Errorf("function %d has ID %d", i, f.ID)
				}
				if names[f.Name] {
					t.Errorf("function %q twice", f.Name)
				}
				names[f.Name] = true
			}
			for i, l := range p.Location {
				if l.ID != uint64(i+1) {
					t.Errorf("location %d has ID %d", i, l.ID)
				}
			}

			// Totals: wall time overall and per category; bytes from disk.
			var wall, bytesRead int64
			perCat := map[string]int64{}
			perFile := map[string]int64{}
			diskProc := map[string]int64{}
			for _, s := range p.Sample {
				fr := frames(s)
				wall += s.Value[0]
				bytesRead += s.Value[1]
				perCat[fr[0]] += s.Value[0]
				cat := s.Label["category"]
				if len(cat) != 1 {
					t.Fatalf("sample %v has category label %v", fr, cat)
				}
				if cat[0] == string(attribution.DiskRead) && len(fr) > 1 {
					perFile[fr[1]] += s.Value[0]
					if f := s.Label["file"]; len(fr) > 1 && fr[1] != attribution.UnidentifiedFile && fr[1] != attribution.OutsidePageCache && (len(f) != 1 || f[0] != fr[1]) {
						t.Errorf("disk sample %v has file label %v", fr, f)
					}
				}
				leaf := fr[len(fr)-1]
				if strings.HasSuffix(leaf, "]") {
					pid := s.NumLabel["pid"]
					if len(pid) != 1 || !strings.HasSuffix(leaf, fmt.Sprintf("[%d]", pid[0])) {
						t.Errorf("process frame %q with pid label %v", leaf, pid)
					}
					if c := s.Label["comm"]; len(c) != 1 || !strings.HasPrefix(leaf, c[0]+"[") {
						t.Errorf("process frame %q with comm label %v", leaf, c)
					}
					if cat[0] == string(attribution.DiskRead) {
						diskProc[leaf] += s.Value[0]
					}
				}
				if s.Value[0] < 0 || s.Value[1] < 0 {
					t.Errorf("negative values %v under %v", s.Value, fr)
				}
			}
			if wall != res.WallNS {
				t.Errorf("wall values sum to %d, want the wall time %d", wall, res.WallNS)
			}
			for _, row := range res.Breakdown {
				if got := perCat[row.Category.Label()]; got != row.NS {
					t.Errorf("%s: %d ns in the profile, want %d", row.Category, got, row.NS)
				}
			}
			var disk uint64
			for _, f := range r.Files {
				disk += f.BytesFromDisk
			}
			if bytesRead != int64(disk) {
				t.Errorf("disk_read values sum to %d, want %d bytes from disk", bytesRead, disk)
			}
			diskRow := res.Row(attribution.DiskRead)
			for _, f := range diskRow.Files {
				if got := perFile[f.Path]; got != f.NS {
					t.Errorf("file %s: %d ns, want the evidence's %d", f.Path, got, f.NS)
				}
			}
			// The fit keeps each process's disk time near its evidence.
			for _, pe := range diskRow.Processes {
				got := diskProc[format.ProcessLabel(pe.PID, pe.Comm)]
				if math.Abs(float64(got-pe.NS)) > max(0.01*float64(diskRow.NS), 1e6) {
					t.Errorf("process %s[%d]: %d ns of disk time, want about %d", pe.Comm, pe.PID, got, pe.NS)
				}
			}
		})
	}
}

func TestPprofStacksNameSubjects(t *testing.T) {
	r, res := fixture(t, "cold-ml")
	p, err := Build(r, res)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, s := range p.Sample {
		got[strings.Join(frames(s), ";")] += s.Value[0]
	}
	want := []string{
		"disk reads;/home/dev/models/qwen_image_fp8.safetensors;python3[300]",
		"JIT compile;ptxas (compiler);ptxas[301]",
		"JIT compile;triton cache (in-process JIT);python3[300]",
		"GPU compute;GPU 0 (NVIDIA H200)",
		"CPU;python3[300]",
		// A download is filed under what its destination is known by.
		"downloads;transformer/diffusion_pytorch_model.safetensors;python3[300]",
	}
	for _, k := range want {
		if got[k] <= 0 {
			t.Errorf("no time under %q; stacks: %v", k, got)
		}
	}
	// A compiler process never shows under another compiler or a file.
	for k := range got {
		if strings.Contains(k, "ptxas[") && !strings.HasPrefix(k, "JIT compile;ptxas (compiler);") {
			t.Errorf("ptxas process under %q", k)
		}
	}
}

func TestPprofEmptyRecord(t *testing.T) {
	r := &record.Record{Schema: record.Schema}
	var buf bytes.Buffer
	if err := Write(&buf, r, nil); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) != 0 {
		t.Errorf("%d samples for an empty run", len(p.Sample))
	}
}

// parsePprofValue reads a value as `go tool pprof -top` prints it for
// nanoseconds ("1.80s", "500ms", "2.50mins", "1.20hrs").
func parsePprofValue(s string) (time.Duration, error) {
	for suf, unit := range map[string]time.Duration{"mins": time.Minute, "hrs": time.Hour} {
		if v, ok := strings.CutSuffix(s, suf); ok {
			f, err := strconv.ParseFloat(v, 64)
			return time.Duration(f * float64(unit)), err
		}
	}
	return time.ParseDuration(s)
}

// TestGoToolPprofTop runs the Go toolchain's pprof on the written profile,
// as a user would, and finds every category with its time.
func TestGoToolPprofTop(t *testing.T) {
	// go test puts its own GOROOT/bin first in the test's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	for _, name := range []string{"cold-ml", "sleep-read-spin", "truth-cold"} {
		t.Run(name, func(t *testing.T) {
			r, res := fixture(t, name)
			dir := t.TempDir()
			path := filepath.Join(dir, name+".pb.gz")
			var buf bytes.Buffer
			if err := Write(&buf, r, res); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goBin, "tool", "pprof", "-top", "-nodefraction=0", "-nodecount=1000", path)
			cmd.Dir = dir // outside the module: no toolchain switch
			cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "PPROF_TMPDIR="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go tool pprof -top: %v\n%s", err, out)
			}
			text := string(out)
			if !strings.Contains(text, "Type: wall") {
				t.Errorf("pprof does not show the wall sample type:\n%s", text)
			}
			cum := map[string]time.Duration{}
			for _, line := range strings.Split(text, "\n") {
				f := strings.Fields(line)
				if len(f) < 6 || !strings.HasSuffix(f[4], "%") {
					continue
				}
				d, err := parsePprofValue(f[3])
				if err != nil {
					continue
				}
				cum[strings.Join(f[5:], " ")] = d
			}
			for _, row := range res.Breakdown {
				if row.NS == 0 {
					continue
				}
				got, ok := cum[row.Category.Label()]
				if !ok {
					t.Errorf("pprof -top does not list %q:\n%s", row.Category.Label(), text)
					continue
				}
				// pprof prints three significant digits.
				if math.Abs(float64(got)-float64(row.NS)) > 0.01*float64(row.NS) {
					t.Errorf("%s: pprof -top shows %v, want %v", row.Category.Label(), got, time.Duration(row.NS))
				}
			}
		})
	}
}

// fixture is a recorded run and its attribution.
func fixture(t *testing.T, name string) (*record.Record, *attribution.Result) {
	t.Helper()
	r := fixtures.Record(t, name)
	return r, attribution.Analyze(r)
}

// A run's labels go on every sample, so that profiles of many ranks stay
// apart when merged; a sample's own label of the same name wins.
func TestRunLabelsOnEverySample(t *testing.T) {
	r := fixtures.Record(t, "cat-cold")
	r.Labels = map[string]string{"host": "node1", "rank": "3", "category": "clash"}
	var buf bytes.Buffer
	if err := Write(&buf, r, nil); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) == 0 {
		t.Fatal("no samples")
	}
	for _, s := range p.Sample {
		if got := s.Label["host"]; len(got) != 1 || got[0] != "node1" {
			t.Errorf("sample %v: host label %v, want [node1]", frames(s), got)
		}
		if got := s.Label["rank"]; len(got) != 1 || got[0] != "3" {
			t.Errorf("sample %v: rank label %v, want [3]", frames(s), got)
		}
		if got := s.Label["category"]; len(got) != 1 || got[0] == "clash" {
			t.Errorf("sample %v: category label %v: the run label must not replace it", frames(s), got)
		}
	}
}
