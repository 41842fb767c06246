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
	evs, err := events(data)
	if err != nil {
		return err
	}
	c := checker{lastTS: map[track]int64{}, stacks: map[track][]open{}, counterTS: map[string]int64{}}
	for i, ev := range evs {
		if err := c.event(ev); err != nil {
			return fmt.Errorf("timeline: event %d: %w", i, err)
		}
	}
	return nil
}

// events reads the document's events: an object's traceEvents, or a
// bare array.
func events(data []byte) ([]map[string]json.RawMessage, error) {
	var evs []map[string]json.RawMessage
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &evs); err != nil {
			return nil, fmt.Errorf("timeline: %w", err)
		}
		return evs, nil
	}
	var doc struct {
		TraceEvents     []map[string]json.RawMessage `json:"traceEvents"`
		DisplayTimeUnit string                       `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(trimmed, &doc); err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	if doc.TraceEvents == nil {
		return nil, errors.New("timeline: no traceEvents array")
	}
	if u := doc.DisplayTimeUnit; u != "" && u != "ms" && u != "ns" {
		return nil, fmt.Errorf("timeline: displayTimeUnit %q is neither ms nor ns", u)
	}
	return doc.TraceEvents, nil
}

type track struct{ pid, tid int64 }

type open struct {
	end  int64
	name string
}

// checker holds what the order checks need across events: each thread
// track's last timestamp and open slices, each counter's last timestamp.
type checker struct {
	lastTS    map[track]int64
	stacks    map[track][]open
	counterTS map[string]int64
}

// header is what every event has: its phase, name, process, time and
// thread.
type header struct {
	ph, name string
	pid, tid int64
	ts       int64
}

func need(ev map[string]json.RawMessage, ph string, fields ...string) error {
	for _, f := range fields {
		if _, ok := ev[f]; !ok {
			return fmt.Errorf("ph %q without %q", ph, f)
		}
	}
	return nil
}

// event checks one event against its phase's fields and the events
// before it.
func (c *checker) event(ev map[string]json.RawMessage) error {
	h, err := headerOf(ev)
	if err != nil {
		return err
	}
	switch h.ph {
	case "M":
		return metadata(ev, h.name)
	case "C":
		return c.counter(ev, h)
	case "i", "I":
		if s, err := str(ev, "s"); err == nil && s != "g" && s != "p" && s != "t" {
			return fmt.Errorf("instant scope %q", s)
		}
	}
	return c.slice(ev, h)
}

// headerOf reads and checks the fields every event of its phase needs.
func headerOf(ev map[string]json.RawMessage) (header, error) {
	var h header
	ph, err := str(ev, "ph")
	if err != nil {
		return h, err
	}
	h.ph = ph
	switch ph {
	case "X", "B", "E", "i", "I", "C":
		err = need(ev, ph, "ts", "pid")
	case "M":
		err = need(ev, ph, "pid", "args")
	default:
		err = fmt.Errorf("unexpected phase %q", ph)
	}
	if err != nil {
		return h, err
	}
	name, nameErr := str(ev, "name")
	if ph != "E" && (nameErr != nil || name == "") {
		return h, fmt.Errorf("ph %q needs a non-empty name", ph)
	}
	h.name = name
	if h.pid, err = integer(ev, "pid"); err != nil {
		return h, err
	}
	if ph != "M" {
		if h.ts, err = nanos(ev, "ts"); err != nil {
			return h, err
		}
	}
	if ph == "X" || ph == "B" || ph == "E" || ph == "i" || ph == "I" || (ph == "M" && strings.HasPrefix(name, "thread_")) {
		if err := need(ev, ph, "tid"); err != nil {
			return h, err
		}
		if h.tid, err = integer(ev, "tid"); err != nil {
			return h, err
		}
	}
	return h, nil
}

// metadata checks a metadata event's args.
func metadata(ev map[string]json.RawMessage, name string) error {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(ev["args"], &args); err != nil {
		return fmt.Errorf("metadata args: %v", err)
	}
	switch name {
	case "process_name", "thread_name", "process_labels":
		if _, err := str(args, "name"); err != nil && name != "process_labels" {
			return fmt.Errorf("%s: %v", name, err)
		}
	case "process_sort_index", "thread_sort_index":
		if _, err := integer(args, "sort_index"); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
	default:
		return fmt.Errorf("unknown metadata event %q", name)
	}
	return nil
}

// counter checks a counter's values and that its time never goes back.
func (c *checker) counter(ev map[string]json.RawMessage, h header) error {
	var args map[string]json.RawMessage
	if err := need(ev, h.ph, "args"); err != nil {
		return err
	}
	if err := json.Unmarshal(ev["args"], &args); err != nil || len(args) == 0 {
		return fmt.Errorf("counter %q needs an args object with values", h.name)
	}
	for k, v := range args {
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return fmt.Errorf("counter %q: arg %q is not a number: %s", h.name, k, v)
		}
	}
	ck := fmt.Sprintf("%d/%s", h.pid, h.name)
	if last, ok := c.counterTS[ck]; ok && h.ts < last {
		return fmt.Errorf("counter %q goes back in time (%d ns after %d ns)", h.name, h.ts, last)
	}
	c.counterTS[ck] = h.ts
	return nil
}

// slice checks a thread track's event: time never goes back, complete
// events nest, every E closes a B.
func (c *checker) slice(ev map[string]json.RawMessage, h header) error {
	tr := track{h.pid, h.tid}
	if last, ok := c.lastTS[tr]; ok && h.ts < last {
		return fmt.Errorf("track %d/%d goes back in time (%d ns after %d ns)", h.pid, h.tid, h.ts, last)
	}
	c.lastTS[tr] = h.ts
	st := c.stacks[tr]
	for len(st) > 0 && st[len(st)-1].end <= h.ts && h.ph != "E" {
		st = st[:len(st)-1]
	}
	switch h.ph {
	case "X":
		if err := need(ev, h.ph, "dur"); err != nil {
			return err
		}
		dur, err := nanos(ev, "dur")
		if err != nil {
			return err
		}
		if dur < 0 {
			return errors.New("negative dur")
		}
		if n := len(st); n > 0 && h.ts+dur > st[n-1].end {
			return fmt.Errorf("%q [%d, %d] overlaps %q (ends %d) on track %d/%d without nesting",
				h.name, h.ts, h.ts+dur, st[n-1].name, st[n-1].end, h.pid, h.tid)
		}
		st = append(st, open{end: h.ts + dur, name: h.name})
	case "B":
		st = append(st, open{end: math.MaxInt64, name: h.name})
	case "E":
		if len(st) == 0 || st[len(st)-1].end != math.MaxInt64 {
			return fmt.Errorf("ph \"E\" without a matching B on track %d/%d", h.pid, h.tid)
		}
		st = st[:len(st)-1]
	}
	c.stacks[tr] = st
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
