package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/attribution/compare"
	"github.com/coldtrace/coldtrace/record"
	"github.com/coldtrace/coldtrace/report/format"
	"github.com/coldtrace/coldtrace/report/segments"
)

// writeSegments prints the per-segment table of rec (report --segments).
func writeSegments(w io.Writer, rec *record.Record, splitIdle time.Duration, asJSON bool) error {
	segs := attribution.Options{}.AnalyzeSegments(rec, attribution.Segments(rec, attribution.SegmentOptions{SplitIdleNS: splitIdle.Nanoseconds()}))
	if asJSON {
		return segments.WriteJSON(w, segs)
	}
	if s := segments.Attached(rec); s != "" {
		if _, err := fmt.Fprintf(w, "  %s\n", format.Escape(s)); err != nil {
			return err
		}
	}
	return segments.WriteText(w, segs)
}

// segmentPair picks the two segments "A,B" (numbers or labels) of rec and
// returns them as records of their own, for compare.New.
func segmentPair(rec *record.Record, spec string, splitIdle time.Duration) (*record.Record, *record.Record, error) {
	a, b, ok := strings.Cut(spec, ",")
	if !ok || strings.TrimSpace(a) == "" || strings.TrimSpace(b) == "" {
		return nil, nil, fmt.Errorf("%w: --segments %q: want two segments, A,B (numbers or labels)", errUsage, spec)
	}
	segs := attribution.Segments(rec, attribution.SegmentOptions{SplitIdleNS: splitIdle.Nanoseconds()})
	sa, err := attribution.PickSegment(segs, a)
	if err != nil {
		return nil, nil, err
	}
	sb, err := attribution.PickSegment(segs, b)
	if err != nil {
		return nil, nil, err
	}
	ra := attribution.SliceRecord(rec, sa.StartNS, sa.EndNS)
	rb := attribution.SliceRecord(rec, sb.StartNS, sb.EndNS)
	// Both keep the record's command: a different one would read as a
	// different workload in the diff.
	return ra, rb, nil
}

// compareSegments is diff --segments A,B RECORD.
func compareSegments(rec *record.Record, spec string, splitIdle time.Duration) (*compare.Diff, error) {
	ra, rb, err := segmentPair(rec, spec, splitIdle)
	if err != nil {
		return nil, err
	}
	return compare.New(ra, rb, nil, nil), nil
}
