package main

import (
	"strings"
	"testing"
)

// TestBootstrapMedianBrackets: the interval holds the median, is a point
// when every ratio is the same, and is the same for the same ratios.
func TestBootstrapMedianBrackets(t *testing.T) {
	xs := []float64{1.00, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08, 1.09, 1.10, 1.11, 1.12, 1.13, 1.50}
	lo, hi := bootstrapMedian(xs, 2000, 0.90)
	if m := median(xs); lo > m || hi < m || lo < xs[0] || hi > xs[len(xs)-1] {
		t.Errorf("interval %.3f–%.3f around median %.3f", lo, hi, m)
	}
	if lo2, hi2 := bootstrapMedian(xs, 2000, 0.90); lo2 != lo || hi2 != hi {
		t.Errorf("two bootstraps of the same ratios differ: %v–%v, %v–%v", lo, hi, lo2, hi2)
	}
	if lo, hi := bootstrapMedian([]float64{1.2, 1.2, 1.2}, 100, 0.90); lo != 1.2 || hi != 1.2 {
		t.Errorf("constant ratios: %v–%v", lo, hi)
	}
}

// TestPairCellDropsSlowMode: a pair with a run whose system time is over
// twice the least of its kind is left out, and counted.
func TestPairCellDropsSlowMode(t *testing.T) {
	off := []loopRun{{nsPerOp: 100, stimeNS: 10}, {nsPerOp: 100, stimeNS: 25}, {nsPerOp: 100, stimeNS: 11}}
	on := []loopRun{{nsPerOp: 110, stimeNS: 10}, {nsPerOp: 300, stimeNS: 12}, {nsPerOp: 120, stimeNS: 12}}
	c := pairCell("pread", off, on)
	if c.Dropped != 1 || len(c.Ratios) != 2 || c.Ratios[0] != 1.1 || c.Ratios[1] != 1.2 {
		t.Errorf("cell %+v: want the second pair dropped, ratios 1.1 and 1.2", c)
	}
}

// TestCheckCollateralBudgets: the pread is held to the floor plus the
// slack, getppid is not judged while the path-syscall probes are on, and
// a ratio whose interval ends over its budget is a miss.
func TestCheckCollateralBudgets(t *testing.T) {
	floor := &situationResult{situation: situation{Name: "floor"}, Cells: []*cell{{Loop: "pread", Ratios: []float64{1.1}, Median: 1.10}}}
	shell := &situationResult{situation: situation{Name: "shell"}, Cells: []*cell{
		{Loop: "pread", Ratios: []float64{1.12}, Median: 1.12, Hi: 1.125},
		{Loop: "getppid", Ratios: []float64{1.0}, Median: 1.0, Hi: 1.03},
		{Loop: "gai", Ratios: []float64{1.0}, Median: 1.0, Hi: 1.01},
	}}
	misses := checkCollateral(shell, floor)
	if len(misses) != 1 || !strings.Contains(misses[0], "getppid beside shell") {
		t.Errorf("misses %q: want getppid's alone", misses)
	}
	fw := &situationResult{situation: situation{Name: "framework", PathSyscalls: true}, Cells: []*cell{
		{Loop: "getppid", Ratios: []float64{1.4}, Median: 1.4, Hi: 1.5},
		{Loop: "pread", Ratios: []float64{1.2}, Median: 1.2, Hi: 1.2},
	}}
	misses = checkCollateral(fw, floor)
	if len(misses) != 1 || !strings.Contains(misses[0], "pread beside framework") || !strings.Contains(misses[0], "floor 1.100") {
		t.Errorf("misses %q: want pread's against the floor alone", misses)
	}
	if m := checkCollateral(floor, floor); len(m) != 0 {
		t.Errorf("the floor judged: %q", m)
	}
}
