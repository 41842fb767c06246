package main

import (
	"strings"
	"testing"
)

// TestNetworkWorkloads: both network workloads are registered, at smoke
// and full size, with the helper's modes.
func TestNetworkWorkloads(t *testing.T) {
	all := func(string) bool { return true }
	ws := networkWorkloads(sizesFor(false), all)
	if len(ws) != 2 || ws[0].Name != "netstream" || ws[1].Name != "netpong" {
		t.Fatalf("workloads %+v", ws)
	}
	if got := strings.Join(ws[0].Args, " "); got != "tcpstream 1073741824" || ws[0].Budget != 1.05 || !ws[0].NoLoss {
		t.Errorf("netstream: %s, budget %.2f, no loss %v", got, ws[0].Budget, ws[0].NoLoss)
	}
	if got := strings.Join(ws[1].Args, " "); got != "tcppong 150000 64" || !ws[1].NoLoss {
		t.Errorf("netpong: %s, no loss %v", got, ws[1].NoLoss)
	}
	for _, n := range networkWorkloadNames {
		if !validWorkload(n) {
			t.Errorf("-only does not accept %s", n)
		}
	}
	if ws := networkWorkloads(sizesFor(true), func(n string) bool { return n == "netpong" }); len(ws) != 1 || ws[0].Name != "netpong" {
		t.Errorf("-only netpong gave %+v", ws)
	}
}

// TestRelativeBudgets: the socket ping-pong's budget is the pipe
// ping-pong's median ratio plus the slack, and its misses follow.
func TestRelativeBudgets(t *testing.T) {
	mk := func(name string, budget, ratio float64) *summary {
		return &summary{workload: &workload{Name: name, Budget: budget}, Ratios: []float64{ratio}, RatioMedian: ratio}
	}
	pipe, sock := mk("ctxswitch", 1.10, 1.07), mk("netpong", 1.12, 1.11)
	sock.checkBudgets()
	res := &results{Workloads: []*summary{pipe, sock}, Misses: sock.Misses}
	if len(res.Misses) != 0 {
		t.Fatalf("fallback budget: misses %q", res.Misses)
	}
	relativeBudgets(res)
	if sock.Budget < 1.0899 || sock.Budget > 1.0901 {
		t.Errorf("budget %.4f, want 1.09", sock.Budget)
	}
	if len(res.Misses) != 1 || !strings.Contains(res.Misses[0], "netpong: wall ratio 1.110 > 1.09") {
		t.Errorf("misses %q", res.Misses)
	}
	sock.RatioMedian, sock.Ratios = 1.08, []float64{1.08}
	relativeBudgets(res)
	if len(res.Misses) != 0 {
		t.Errorf("within the slack: misses %q", res.Misses)
	}
}
