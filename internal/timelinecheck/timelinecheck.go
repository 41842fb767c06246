// Package timelinecheck validates Chrome trace-event JSON (the format of
// coldtrace's --timeline and `report --format perfetto`) the way Perfetto
// and chrome://tracing read it. It is a test helper shared by the tests of
// report/timeline and cmd/coldtrace; no product code imports it.
package timelinecheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Validate checks a Chrome trace-event JSON document the way the
// timeline's consumers read it: the document is an object with a
// traceEvents array (or a bare array); every event has the fields its
// phase requires (X: name, ts, dur ≥ 0, pid, tid; C: name, ts, pid and
// numeric args; M: a known metadata name, pid, and its args; B/E and
// instant events likewise); within each thread track timestamps never go
// back and complete events nest properly (none partially overlaps
// another); each counter's timestamps never go back.
func Validate(data []byte) error {
	var evs []map[string]json.RawMessage
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &evs); err != nil {
			return fmt.Errorf("timeline: %w", err)
		}
	} else {
		var doc struct {
			TraceEvents     []map[string]json.RawMessage `json:"traceEvents"`
			DisplayTimeUnit string                       `json:"displayTimeUnit"`
		}
		if err := json.Unmarshal(trimmed, &doc); err != nil {
			return fmt.Errorf("timeline: %w", err)
		}
		if doc.TraceEvents == nil {
			return errors.New("timeline: no traceEvents array")
		}
		if u := doc.DisplayTimeUnit; u != "" && u != "ms" && u != "ns" {
			return fmt.Errorf("timeline: displayTimeUnit %q is neither ms nor ns", u)
		}
		evs = doc.TraceEvents
	}
	type track struct{ pid, tid int64 }
	type open struct {
		end  int64
		name string
	}
	lastTS := map[track]int64{}
	stacks := map[track][]open{}
	counterTS := map[string]int64{}
	for i, ev := range evs {
		fail := func(format string, a ...any) error {
			return fmt.Errorf("timeline: event %d: %s", i, fmt.Sprintf(format, a...))
		}
		ph, err := str(ev, "ph")
		if err != nil {
			return fail("%v", err)
		}
		need := func(fields ...string) error {
			for _, f := range fields {
				if _, ok := ev[f]; !ok {
					return fail("ph %q without %q", ph, f)
				}
			}
			return nil
		}
		switch ph {
		case "X", "B", "E", "i", "I", "C":
			if err := need("ts", "pid"); err != nil {
				return err
			}
		case "M":
			if err := need("pid", "args"); err != nil {
				return err
			}
		default:
			return fail("unexpected phase %q", ph)
		}
		name, nameErr := str(ev, "name")
		if ph != "E" && (nameErr != nil || name == "") {
			return fail("ph %q needs a non-empty name", ph)
		}
		pid, err := integer(ev, "pid")
		if err != nil {
			return fail("%v", err)
		}
		var ts int64
		if ph != "M" {
			if ts, err = nanos(ev, "ts"); err != nil {
				return fail("%v", err)
			}
		}
		var tid int64
		if ph == "X" || ph == "B" || ph == "E" || ph == "i" || ph == "I" || (ph == "M" && strings.HasPrefix(name, "thread_")) {
			if err := need("tid"); err != nil {
				return err
			}
			if tid, err = integer(ev, "tid"); err != nil {
				return fail("%v", err)
			}
		}
		tr := track{pid, tid}
		switch ph {
		case "M":
			var args map[string]json.RawMessage
			if err := json.Unmarshal(ev["args"], &args); err != nil {
				return fail("metadata args: %v", err)
			}
			switch name {
			case "process_name", "thread_name", "process_labels":
				if _, err := str(args, "name"); err != nil && name != "process_labels" {
					return fail("%s: %v", name, err)
				}
			case "process_sort_index", "thread_sort_index":
				if _, err := integer(args, "sort_index"); err != nil {
					return fail("%s: %v", name, err)
				}
			default:
				return fail("unknown metadata event %q", name)
			}
			continue
		case "C":
			var args map[string]json.RawMessage
			if err := need("args"); err != nil {
				return err
			}
			if err := json.Unmarshal(ev["args"], &args); err != nil || len(args) == 0 {
				return fail("counter %q needs an args object with values", name)
			}
			for k, v := range args {
				if _, err := strconv.ParseFloat(string(v), 64); err != nil {
					return fail("counter %q: arg %q is not a number: %s", name, k, v)
				}
			}
			ck := fmt.Sprintf("%d/%s", pid, name)
			if last, ok := counterTS[ck]; ok && ts < last {
				return fail("counter %q goes back in time (%d ns after %d ns)", name, ts, last)
			}
			counterTS[ck] = ts
			continue
		case "i", "I":
			if s, err := str(ev, "s"); err == nil && s != "g" && s != "p" && s != "t" {
				return fail("instant scope %q", s)
			}
		}
		if last, ok := lastTS[tr]; ok && ts < last {
			return fail("track %d/%d goes back in time (%d ns after %d ns)", pid, tid, ts, last)
		}
		lastTS[tr] = ts
		st := stacks[tr]
		for len(st) > 0 && st[len(st)-1].end <= ts && ph != "E" {
			st = st[:len(st)-1]
		}
		switch ph {
		case "X":
			if err := need("dur"); err != nil {
				return err
			}
			dur, err := nanos(ev, "dur")
			if err != nil {
				return fail("%v", err)
			}
			if dur < 0 {
				return fail("negative dur")
			}
			if n := len(st); n > 0 && ts+dur > st[n-1].end {
				return fail("%q [%d, %d] overlaps %q (ends %d) on track %d/%d without nesting",
					name, ts, ts+dur, st[n-1].name, st[n-1].end, pid, tid)
			}
			st = append(st, open{end: ts + dur, name: name})
		case "B":
			st = append(st, open{end: math.MaxInt64, name: name})
		case "E":
			if len(st) == 0 || st[len(st)-1].end != math.MaxInt64 {
				return fail("E without a matching B on track %d/%d", pid, tid)
			}
			st = st[:len(st)-1]
		}
		stacks[tr] = st
	}
	return nil
}

func str(m map[string]json.RawMessage, k string) (string, error) {
	raw, ok := m[k]
	if !ok {
		return "", fmt.Errorf("no %q", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%q is not a string: %s", k, raw)
	}
	return s, nil
}

func integer(m map[string]json.RawMessage, k string) (int64, error) {
	raw, ok := m[k]
	if !ok {
		return 0, fmt.Errorf("no %q", k)
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer: %s", k, raw)
	}
	return v, nil
}

// nanos reads a time in microseconds as whole nanoseconds.
func nanos(m map[string]json.RawMessage, k string) (int64, error) {
	raw, ok := m[k]
	if !ok {
		return 0, fmt.Errorf("no %q", k)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%q is not a number: %s", k, raw)
	}
	return int64(math.Round(f * 1000)), nil
}
