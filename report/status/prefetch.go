package status

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/residency"
)

// NewPrefetchDocument is what prefetch read, as the --json document.
func NewPrefetchDocument(plan residency.Plan, res residency.Result) PrefetchDocument {
	out := PrefetchDocument{Schema: PrefetchSchema, Verdict: prefetchVerdict(plan, res), ReadBytes: res.ReadBytes, TotalBytes: plan.TotalBytes,
		ElapsedNS: int64(res.Elapsed)}
	for _, f := range res.Files {
		e := PrefetchedFile{Path: f.Path, ReadBytes: f.ReadBytes}
		if f.Err != nil {
			e.Error = f.Err.Error()
		}
		out.Files = append(out.Files, e)
	}
	return out
}

// WritePrefetchText says what prefetch read.
func WritePrefetchText(w io.Writer, plan residency.Plan, res residency.Result) error {
	_, err := fmt.Fprintf(w, "coldtrace prefetch: %s\n", prefetchVerdict(plan, res))
	return err
}

// prefetchVerdict is prefetch's one-line answer: "read 64.0 MiB of 1 file
// (128.0 MiB; the rest was cached) in 0.4s, 160 MB/s".
func prefetchVerdict(plan residency.Plan, res residency.Result) string {
	return fmt.Sprintf("read %s of %s (%s; the rest was cached) in %s, %.0f MB/s",
		format.Bytes(uint64(res.ReadBytes)), counted(int64(len(plan.Files)), "file", "files"), format.Bytes(uint64(plan.TotalBytes)),
		format.Duration(int64(res.Elapsed)), float64(res.ReadBytes)/max(res.Elapsed.Seconds(), 1e-9)/1e6)
}

// planVerdict is --dry-run's one-line answer: "would read 64.0 MiB of 1
// file (128.0 MiB)".
func planVerdict(plan residency.Plan) string {
	return fmt.Sprintf("would read %s of %s (%s)", format.Bytes(uint64(plan.MissingBytes)),
		counted(int64(len(plan.Files)), "file", "files"), format.Bytes(uint64(plan.TotalBytes)))
}

// The schema ids of prefetch's two documents: what was read, and with
// --dry-run what would be (a different document, so a reader can tell
// them apart by the id alone).
const (
	PrefetchSchema     = "coldtrace.prefetch/v1"
	PrefetchPlanSchema = "coldtrace.prefetch-plan/v1"
)

// ProgressLine is the live line on a terminal.
func ProgressLine(p residency.Progress) string {
	s := fmt.Sprintf("prefetch: %s of %s, %d/%d files, %.0f MB/s", format.Bytes(uint64(p.DoneBytes)), format.Bytes(uint64(p.TotalBytes)),
		p.FilesDone, p.Files, p.BytesPerSec()/1e6)
	if eta := p.ETA(); eta > 0 {
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

// prefetchETA is the time to read what is missing at rate; 0 when the
// rate is not known.
func prefetchETA(plan residency.Plan, rate float64) int64 {
	if rate > 0 {
		return int64(float64(plan.MissingBytes) / rate * 1e9)
	}
	return 0
}

// NewPrefetchPlanDocument is --dry-run --json: what would be read at
// rate (bytes per second; 0 when not known), and whether it fits (fit
// is the refusal, nil when it does).
func NewPrefetchPlanDocument(plan residency.Plan, rate float64, fit error) PrefetchPlanDocument {
	out := PrefetchPlanDocument{Schema: PrefetchPlanSchema, Verdict: planVerdict(plan), DryRun: true, Plan: plan, Fits: fit == nil, Rate: rate,
		ETANS: prefetchETA(plan, rate)}
	if fit != nil {
		out.Refusal = fit.Error()
	}
	return out
}

// WritePrefetchPlanText is --dry-run: what would be read, and whether it
// fits.
func WritePrefetchPlanText(w io.Writer, plan residency.Plan, rate float64, fit error) error {
	etaNS := prefetchETA(plan, rate)
	var b strings.Builder
	fmt.Fprintf(&b, "coldtrace prefetch --dry-run: %s\n", planVerdict(plan))
	for _, f := range plan.Files {
		switch {
		case !f.Known:
			Line(&b, "  %s: all %s (residency unknown: %s)", f.Path, format.Bytes(uint64(f.Size)), f.Unknown)
		case f.MissingBytes == 0:
			Line(&b, "  %s: cached, nothing to read", f.Path)
		default:
			Line(&b, "  %s: %s in %d ranges", f.Path, format.Bytes(uint64(f.MissingBytes)), len(f.Missing))
		}
	}
	if etaNS > 0 {
		fmt.Fprintf(&b, "  about %s at the disk rate of the recorded run (%.0f MB/s)\n", RoughDuration(etaNS), rate/1e6)
	}
	if fit != nil {
		Line(&b, "  would refuse: %v (--force reads anyway)", fit)
	} else {
		b.WriteString("  fits in memory\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PrefetchDocument is `coldtrace prefetch --json`: what was read.
type PrefetchDocument struct {
	Schema string `json:"schema"`
	// Verdict is the one-line answer, the text's.
	Verdict    string           `json:"verdict"`
	Files      []PrefetchedFile `json:"files"`
	ReadBytes  int64            `json:"read_bytes"`
	TotalBytes int64            `json:"total_bytes"`
	ElapsedNS  int64            `json:"elapsed_ns"`
}

// PrefetchedFile is one file of PrefetchDocument.
type PrefetchedFile struct {
	Path      string `json:"path"`
	ReadBytes int64  `json:"read_bytes"`
	Error     string `json:"error,omitempty"`
}

// PrefetchPlanDocument is `coldtrace prefetch --dry-run --json`: what would be
// read, and whether it fits.
type PrefetchPlanDocument struct {
	Schema string `json:"schema"`
	// Verdict is the one-line answer, the text's first line.
	Verdict string         `json:"verdict"`
	DryRun  bool           `json:"dry_run"`
	Plan    residency.Plan `json:"plan"`
	Fits    bool           `json:"fits"`
	Refusal string         `json:"refusal,omitempty"`
	Rate    float64        `json:"disk_rate_bytes_per_s,omitempty"`
	ETANS   int64          `json:"eta_ns,omitempty"`
}
