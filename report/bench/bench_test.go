package bench

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coldtrace/coldtrace/attribution/abtest"
)

const ms = int64(1e6)

// fixture is a cold/warm bench: a warm-up, then A B A B A with the As
// mostly disk reads and one B busy.
func fixture() *abtest.Report {
	rep := &abtest.Report{Plan: abtest.Plan{
		A: abtest.Command{Argv: []string{"cat", "/data/<model>.bin"}, Cold: true},
		B: abtest.Command{Argv: []string{"cat", "/data/<model>.bin"}},
	}}
	walls := []int64{30, 200, 32, 210, 31, 205}
	for i, w := range walls {
		side := abtest.B
		if i%2 == 1 {
			side = abtest.A
		}
		res := &abtest.Result{WallNS: w * ms, SysNS: 10 * ms, StdoutSHA256: "ab12cd34ef"}
		res.Split[4] = 25 * ms
		res.Split[0] = w*ms - res.Split[4]
		rr := abtest.RunReport{N: i + 1, Index: i, Side: side, Warmup: i == 0, Result: res}
		if i == 4 {
			rr.Interfered = true
			res.Interference = abtest.Interference{CPUMean: 0.9, Top: []abtest.Busy{{PID: 77, Comm: "hog\x1b[31m", CPUs: 0.9}}}
		}
		rep.Runs = append(rep.Runs, rr)
	}
	var runs []abtest.Run
	for _, rr := range rep.Runs[1:] {
		runs = append(runs, abtest.Run{Side: rr.Side, WallNS: rr.WallNS, SysNS: rr.SysNS, Split: rr.Split, Interfered: rr.Interfered})
	}
	rep.Summary = abtest.Analyze(runs, abtest.Options{})
	for i, st := range rep.Summary.Status {
		rep.Runs[i+1].Status = st
	}
	return rep
}

func TestTextAndVerdict(t *testing.T) {
	rep := fixture()
	var b bytes.Buffer
	if err := Table(&b, rep); err != nil {
		t.Fatal(err)
	}
	if err := Summary(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"warm-up", "BUSY", "hog\\x1b[31m[77]", "drift: first vs last A +2.5% (+5ms); the line through the As +2.5%",
		"verdict: B is 175ms faster (±2ms, -84.7%): 175ms less disk reads", "B run 3 vs the A mean around it: -173ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a process name's escape sequence reached the terminal")
	}
	var md bytes.Buffer
	if err := Markdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count("\n"+md.String(), "\n| "); lines != len(rep.Runs)+1 {
		t.Errorf("markdown has %d table rows, want %d:\n%s", lines, len(rep.Runs)+1, md.String())
	}
	if strings.Contains(out, "VRAM") {
		t.Error("a VRAM column without a GPU")
	}
	rep.Runs[2].VRAMPeakBytes = 3 << 30
	b.Reset()
	if err := Table(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "VRAM") || !strings.Contains(b.String(), "3.0 GiB") {
		t.Errorf("no VRAM column:\n%s", b.String())
	}
	md.Reset()
	if err := Markdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(line, "|") && strings.Count(line, " | ") != 14 && !strings.HasPrefix(line, "|---") {
			t.Errorf("markdown row with %d cells: %s", strings.Count(line, " | ")+1, line)
		}
	}
}

func writeSVG(t *testing.T, rep *abtest.Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := SVG(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The plot is well-formed XML with one bar group per run, and the drift
// line joins the counted As.
func TestSVGWellFormed(t *testing.T) {
	rep := fixture()
	svg := writeSVG(t, rep)
	d := xml.NewDecoder(bytes.NewReader(svg))
	bars, drift := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && a.Value == "run" && se.Name.Local == "g" {
					bars++
				}
				if a.Name.Local == "class" && a.Value == "drift" {
					drift++
					for _, p := range se.Attr {
						if p.Name.Local == "points" && len(strings.Fields(p.Value)) != 3 {
							t.Errorf("drift line through %q, want the 3 As", p.Value)
						}
					}
				}
			}
		}
	}
	if bars != len(rep.Runs) || drift != 1 {
		t.Errorf("%d bars and %d drift lines, want %d and 1", bars, drift, len(rep.Runs))
	}
	if !bytes.Contains(svg, []byte("&lt;model&gt;")) {
		t.Error("the command's < > were not escaped")
	}
}

// Debian's chromium renders the SVG: the screenshot has the A and B
// outline colours in it.
func TestSVGRendersInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("chromium is not installed (apt-get install chromium): the SVG is not rendered")
	}
	dir := t.TempDir()
	svgPath, pngPath := filepath.Join(dir, "bench.svg"), filepath.Join(dir, "bench.png")
	if err := os.WriteFile(svgPath, writeSVG(t, fixture()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// --no-sandbox: CI runs this as root, where chromium's sandbox refuses.
	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--screenshot="+pngPath,
		"--window-size=900,450", "file://"+svgPath)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	t.Logf("chromium rendered in %v", time.Since(start).Round(time.Millisecond))
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]uint32{"A": {0x1f, 0x4e, 0x9c}, "B": {0xe6, 0x7e, 0x00}, "disk": {0xd6, 0x27, 0x28}}
	found := map[string]int{}
	bnd := img.Bounds()
	for y := bnd.Min.Y; y < bnd.Max.Y; y++ {
		for x := bnd.Min.X; x < bnd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			for k, c := range want {
				if near(r>>8, c[0]) && near(g>>8, c[1]) && near(b>>8, c[2]) {
					found[k]++
				}
			}
		}
	}
	for k := range want {
		if found[k] < 50 {
			t.Errorf("the screenshot has %d pixels of %s's colour", found[k], k)
		}
	}
}

func near(a, b uint32) bool { return a+6 >= b && b+6 >= a }

// A verdict of too few says how many of the pairs were independent, and
// the chance of their agreeing, from that count.
func TestVerdictTooFewIndependent(t *testing.T) {
	s := abtest.Summary{MedianNS: -814_000, MinNS: -2 * ms, MaxNS: -19_000,
		Verdict: abtest.Verdict{Kind: abtest.TooFew, Pairs: 6, Independent: 3}}
	want := "too few pairs to tell: B − A median -814µs (range -2ms … -19µs) over 6 pairs (3 independent: Bs between the same two As share them), all one way, as the same command on both sides gives 1 time in 4; 5 independent are needed"
	if got := Verdict(s); !strings.HasPrefix(got, want) {
		t.Errorf("got  %q\nwant %q…", got, want)
	}
	s.Verdict.Independent = 0 // a bench JSON from before the count
	s.Verdict.Pairs = 4
	if got := Verdict(s); !strings.Contains(got, "over 4 pairs, all one way, as the same command on both sides gives 1 time in 8") {
		t.Errorf("old verdict: %q", got)
	}
}
