package main

import (
	"sort"
	"strconv"

	"github.com/coldtrace/coldtrace/record"
)

// markReady stores when the traced program was ready to serve: the
// first mark named label (--ready), else the first mark, else, in a trace
// cut at idle stretches, where the first busy stretch ended (the last
// busy sample before the second segment). A --ready label no mark carries sets nothing, with a
// warning: guessing would blame start-up compiles on requests. It runs
// before splitIdleMarks turns the idle cuts into marks.
func markReady(rec *record.Record, label string, splitIdleNS int64) {
	marks := append([]record.Mark(nil), rec.Marks...)
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].AtNS < marks[j].AtNS })
	if label != "" {
		for _, m := range marks {
			if m.Label == label {
				rec.Ready = &record.Ready{AtNS: m.AtNS, By: "mark " + strconv.Quote(m.Label)}
				return
			}
		}
		rec.Warnings = append(rec.Warnings, "no mark was labelled "+strconv.Quote(label)+" (--ready): compiles after ready were not looked for")
		return
	}
	if len(marks) > 0 {
		rec.Ready = &record.Ready{AtNS: marks[0].AtNS, By: "mark " + strconv.Quote(marks[0].Label)}
		return
	}
	if splitIdleNS <= 0 {
		return
	}
	idle := *rec
	splitIdleMarks(&idle, splitIdleNS)
	if len(idle.Marks) > 1 {
		rec.Ready = &record.Ready{AtNS: busyEnd(rec.Samples, idle.Marks[1].AtNS), By: "the end of the first busy stretch"}
	}
}

// busyEnd is the end of the last sample before cut in which the traced
// processes used at least the idle share (5%) of one CPU: where the busy
// stretch before the idle one that ends at cut stopped.
func busyEnd(samples []record.Sample, cut int64) int64 {
	s := append([]record.Sample(nil), samples...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].EndNS < s[j].EndNS })
	end, prev := int64(0), int64(0)
	for _, smp := range s {
		if smp.EndNS > cut {
			break
		}
		var cpu int64
		for _, td := range smp.Threads {
			cpu += max(td.CPUNS, 0) + max(td.IOWaitNS, 0)
		}
		if d := smp.EndNS - prev; d > 0 && float64(cpu) >= 0.05*float64(d) {
			end = smp.EndNS
		}
		prev = smp.EndNS
	}
	return end
}
